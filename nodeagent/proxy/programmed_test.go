package proxy

import (
	"testing"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestReportsProgrammed(t *testing.T) {
	for _, tc := range []struct {
		desc       string
		awaiting   bool
		mode       paasv1.AnnounceMode
		by, progBy []string
		want       bool
	}{
		{"not awaiting: nothing to report", false, paasv1.AnnounceL2, []string{"n1"}, nil, false},
		{"L2 owner: reports", true, paasv1.AnnounceL2, []string{"n1"}, nil, true},
		{"L2 owner that reported already", true, paasv1.AnnounceL2, []string{"n1"}, []string{"n1"}, false},
		{"L2, another node owns it: its report would not count", true, paasv1.AnnounceL2, []string{"n2"}, nil, false},
		{"L2, no owner yet: waits to be one", true, paasv1.AnnounceL2, nil, nil, false},
		{"BGP advertiser among others: reports", true, paasv1.AnnounceBGP, []string{"n2", "n1"}, []string{"n2"}, true},
		{"None: any node reports", true, paasv1.AnnounceNone, nil, nil, true},
	} {
		ip := &paasv1.IP{Spec: paasv1.IPSpec{AwaitingDataPath: tc.awaiting}, Status: paasv1.IPStatus{AnnouncedBy: tc.by, ProgrammedBy: tc.progBy}}
		if got := reportsProgrammed(ip, "n1", tc.mode); got != tc.want {
			t.Errorf("%s: reportsProgrammed = %v, want %v", tc.desc, got, tc.want)
		}
	}
}
