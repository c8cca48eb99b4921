package ipgroup

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func kept(addr string, holders ...string) keptAddress {
	return keptAddress{addr: netip.MustParseAddr(addr), holders: holders}
}

func TestDecideProtection(t *testing.T) {
	many := func(n int) []keptAddress {
		var out []keptAddress
		for i := range n {
			out = append(out, kept(fmt.Sprintf("192.0.2.%d", i+1), fmt.Sprintf("ns/s%d", i)))
		}
		return out
	}
	for _, tc := range []struct {
		desc        string
		v           protectionView
		wantStep    finalizerStep
		wantStatus  metav1.ConditionStatus
		wantReason  string
		wantMessage string // a part of it
	}{
		{desc: "a group nobody holds from: no finalizer, nothing kept",
			v: protectionView{}, wantStep: finalizerLeave, wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonNoneKept},
		{desc: "its first holder: protect it",
			v: protectionView{holders: 1}, wantStep: finalizerAdd, wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonNoneKept},
		{desc: "protected already",
			v: protectionView{holders: 1, finalizer: true}, wantStep: finalizerLeave, wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonNoneKept},
		{desc: "its last holder left: the finalizer goes, as a group no one held from has none",
			v: protectionView{finalizer: true}, wantStep: finalizerRemove, wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonNoneKept},
		{desc: "an address excluded under its holder: kept, and said so",
			v: protectionView{holders: 2, finalizer: true, kept: []keptAddress{kept("192.0.2.5", "ns/a")}}, wantStep: finalizerLeave,
			wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonKeptUntilReleased,
			wantMessage: "1 Service(s) keep addresses the group no longer allows (segment, addresses or excludedIPs changed): ns/a (192.0.2.5); set vip.paas.org/release-addresses=true on the IPGroup"},
		{desc: "released: they move",
			v: protectionView{holders: 1, finalizer: true, released: true, kept: []keptAddress{kept("192.0.2.5", "ns/a")}}, wantStep: finalizerLeave,
			wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonReleasing, wantMessage: "move as soon as another address is free: ns/a (192.0.2.5)"},
		{desc: "deleted with holders: Terminating, the holders named",
			v: protectionView{deleting: true, holders: 2, finalizer: true, kept: []keptAddress{kept("192.0.2.5", "ns/b"), kept("192.0.2.6", "ns/a", "ns/c")}}, wantStep: finalizerLeave,
			wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonDeletionBlocked,
			wantMessage: "the IPGroup is being deleted and 3 Service(s) still hold its addresses: ns/a (192.0.2.6), ns/b (192.0.2.5), ns/c (192.0.2.6); they keep them"},
		{desc: "deleted and released, holders still moving: the finalizer stays",
			v: protectionView{deleting: true, released: true, holders: 1, finalizer: true, kept: []keptAddress{kept("192.0.2.5", "ns/a")}}, wantStep: finalizerLeave,
			wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonReleasing, wantMessage: "; the group is deleted once they have moved"},
		{desc: "deleted, the last holder gone: let it go",
			v: protectionView{deleting: true, released: true, finalizer: true}, wantStep: finalizerRemove, wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonNoneKept},
		{desc: "deleted without holders nor finalizer: nothing to do",
			v: protectionView{deleting: true}, wantStep: finalizerLeave, wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonNoneKept},
		{desc: "deleted while its first holder appears: not protected again (the API server refuses new finalizers then)",
			v: protectionView{deleting: true, holders: 1, kept: []keptAddress{kept("192.0.2.5", "ns/a")}}, wantStep: finalizerLeave,
			wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonDeletionBlocked},
		{desc: "many holders: the message names five and counts the rest",
			v: protectionView{holders: 8, finalizer: true, kept: many(8)}, wantStep: finalizerLeave,
			wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonKeptUntilReleased,
			wantMessage: "8 Service(s) keep addresses the group no longer allows (segment, addresses or excludedIPs changed): ns/s0 (192.0.2.1), ns/s1 (192.0.2.2), ns/s2 (192.0.2.3), ns/s3 (192.0.2.4), ns/s4 (192.0.2.5) and 3 more;"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			step, c := decideProtection(tc.v, 7)
			if step != tc.wantStep {
				t.Errorf("step = %s, want %s", step, tc.wantStep)
			}
			if c.Type != paasv1.IPGroupAddressesKept || c.Status != tc.wantStatus || c.Reason != tc.wantReason || c.ObservedGeneration != 7 {
				t.Errorf("condition = %+v, want %s %s", c, tc.wantStatus, tc.wantReason)
			}
			if !strings.Contains(c.Message, tc.wantMessage) {
				t.Errorf("message = %q, want it to contain %q", c.Message, tc.wantMessage)
			}
		})
	}
}
