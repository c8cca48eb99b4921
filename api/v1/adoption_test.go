package v1

import (
	"testing"
	"time"
)

func TestHandOverExpected(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		desc, value string
		want        bool
	}{
		{"not adopted", "", false},
		{"adopted a minute ago", now.Add(-time.Minute).Format(time.RFC3339), true},
		{"adopted just before the window ends", now.Add(-AdoptionHandOver + time.Second).Format(time.RFC3339), true},
		{"the window is over", now.Add(-AdoptionHandOver).Format(time.RFC3339), false},
		{"a time in the future is not trusted", now.Add(time.Hour).Format(time.RFC3339), false},
		{"garbage", "yesterday", false},
	} {
		ip := &IP{}
		if tc.value != "" {
			ip.Annotations = map[string]string{AdoptedAnnotation: tc.value}
		}
		if got := ip.HandOverExpected(now); got != tc.want {
			t.Errorf("%s: HandOverExpected = %v, want %v", tc.desc, got, tc.want)
		}
	}
}

func TestProxyReady(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		awaiting   bool
		mode       AnnounceMode
		by, progBy []string
		want       bool
	}{
		{"not awaiting the data path (allocated here, or handed over already)", false, AnnounceL2, nil, nil, true},
		{"L2: no owner yet", true, AnnounceL2, nil, nil, false},
		{"L2: the owner has not reported", true, AnnounceL2, []string{"n1"}, nil, false},
		{"L2: a node that is not the owner reported", true, AnnounceL2, []string{"n1"}, []string{"n2"}, false},
		{"L2: the owner reported", true, AnnounceL2, []string{"n1"}, []string{"n1"}, true},
		{"L2: the owner changed; the new one has not reported", true, AnnounceL2, []string{"n2"}, []string{"n1"}, false},
		{"L2: the new owner reported", true, AnnounceL2, []string{"n2"}, []string{"n1", "n2"}, true},
		{"BGP: one advertiser of two reported", true, AnnounceBGP, []string{"n1", "n2"}, []string{"n2"}, false},
		{"BGP: every advertiser reported", true, AnnounceBGP, []string{"n1", "n2"}, []string{"n2", "n1", "n3"}, true},
		{"BGP: no advertiser yet, a node reported", true, AnnounceBGP, nil, []string{"n3"}, false},
		{"None: no report", true, AnnounceNone, nil, nil, false},
		{"None: a node reported", true, AnnounceNone, nil, []string{"n3"}, true},
	} {
		ip := &IP{Spec: IPSpec{AwaitingDataPath: tc.awaiting}, Status: IPStatus{AnnouncedBy: tc.by, ProgrammedBy: tc.progBy}}
		if got := ip.ProxyReady(tc.mode); got != tc.want {
			t.Errorf("%s: ProxyReady = %v, want %v", tc.desc, got, tc.want)
		}
	}
}

func TestAdoptedNodeLeft(t *testing.T) {
	for _, tc := range []struct {
		desc, from string
		by         []string
		want       bool
	}{
		{"not adopted from a node", "", []string{"n2"}, false},
		{"no one announces it yet", "n1", nil, false},
		{"the node it was adopted from announces it", "n1", []string{"n1"}, false},
		{"another node announces it", "n1", []string{"n2"}, true},
	} {
		ip := &IP{Spec: IPSpec{AdoptedFromNode: tc.from}, Status: IPStatus{AnnouncedBy: tc.by}}
		if got := ip.AdoptedNodeLeft(); got != tc.want {
			t.Errorf("%s: AdoptedNodeLeft = %v, want %v", tc.desc, got, tc.want)
		}
	}
}
