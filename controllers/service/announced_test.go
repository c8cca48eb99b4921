package service

import (
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestAnnouncedCondition(t *testing.T) {
	v4, v6 := netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("2001:db8::10")
	tests := []struct {
		desc       string
		anns       []announcement
		wantOK     bool
		wantStatus metav1.ConditionStatus
		wantReason string
		wantText   []string
	}{
		{desc: "no address, no condition", wantOK: false},
		{"announced", []announcement{{addr: v4, group: "g", mode: paasv1.AnnounceL2, by: []string{"node1"}}}, true,
			metav1.ConditionTrue, paasv1.ReasonAnnounced, []string{"192.0.2.10 announced by node1 (L2)"}},
		{"no node yet", []announcement{{addr: v4, group: "g", mode: paasv1.AnnounceL2}}, true,
			metav1.ConditionFalse, paasv1.ReasonNoAnnouncer, []string{"no node announces 192.0.2.10", "IPGroup g", "Announceable"}},
		{"one family announced, the other not", []announcement{
			{addr: v4, group: "g", mode: paasv1.AnnounceL2, by: []string{"node1"}},
			{addr: v6, group: "g6", mode: paasv1.AnnounceL2}}, true,
			metav1.ConditionFalse, paasv1.ReasonNoAnnouncer, []string{"192.0.2.10 announced by node1", "no node announces 2001:db8::10"}},
		{"static routing", []announcement{{addr: v4, group: "g", mode: paasv1.AnnounceNone}}, true,
			metav1.ConditionTrue, paasv1.ReasonStaticRouting, []string{"announce.mode None"}},
		{"BGP, no session up yet", []announcement{{addr: v4, group: "g", mode: paasv1.AnnounceBGP}}, true,
			metav1.ConditionFalse, paasv1.ReasonNoAnnouncer, []string{"no node advertises 192.0.2.10 by BGP", "Established"}},
		{"BGP, advertised by every eligible node", []announcement{{addr: v4, group: "g", mode: paasv1.AnnounceBGP, by: []string{"node1", "node2"}}}, true,
			metav1.ConditionTrue, paasv1.ReasonAnnounced, []string{"192.0.2.10 advertised by node1, node2 (BGP)"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			c, ok := announcedCondition(3, tt.anns)
			if ok != tt.wantOK {
				t.Fatalf("ok = %v, want %v", ok, tt.wantOK)
			}
			if !ok {
				return
			}
			if c.Type != paasv1.ConditionAnnounced || c.Status != tt.wantStatus || c.Reason != tt.wantReason || c.ObservedGeneration != 3 {
				t.Errorf("condition = %+v, want %s %s", c, tt.wantStatus, tt.wantReason)
			}
			for _, s := range tt.wantText {
				if !strings.Contains(c.Message, s) {
					t.Errorf("message %q lacks %q", c.Message, s)
				}
			}
		})
	}
}
