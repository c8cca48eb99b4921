package announce

import (
	"net/netip"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// TestDecideBGPAggregates: a group with aggregationLength makes each node
// advertise one covering route per family for the Cluster VIPs it carries; a
// Local VIP (a Service that turned Local holding one) keeps its host route;
// a cordoned node would have advertised the covering route (graceful
// shutdown withdraws it by that prefix).
func TestDecideBGPAggregates(t *testing.T) {
	g := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "agg"}, Spec: paasv1.IPGroupSpec{
		Segment: "203.0.113.128/25", Addresses: []string{"2001:db8::1:0/112"}, Announce: &paasv1.Announce{
			Mode: paasv1.AnnounceBGP, BGP: &paasv1.BGPAnnounce{AggregationLength: ptr.To[int32](28), AggregationLengthV6: ptr.To[int32](120)}}}}
	c, ok := election.CandidacyOf(g)
	if !ok {
		t.Fatal("CandidacyOf: not announced")
	}
	local := c
	local.LocalNodes = map[string]bool{"a": true}
	vips := map[netip.Addr]vipCandidacy{
		netip.MustParseAddr("203.0.113.129"): {Candidacy: c, group: g},
		netip.MustParseAddr("203.0.113.130"): {Candidacy: c, group: g},
		netip.MustParseAddr("203.0.113.150"): {Candidacy: c, group: g},
		netip.MustParseAddr("203.0.113.131"): {Candidacy: local, group: g},
		netip.MustParseAddr("2001:db8::1:5"): {Candidacy: c, group: g},
		netip.MustParseAddr("2001:db8::1:6"): {Candidacy: c, group: g},
	}
	routes, _, _, _ := decideBGP("a", vips, []election.Node{{Name: "a"}, {Name: "b"}}, nil)
	var got []string
	for _, r := range routes {
		got = append(got, r.Prefix.String())
	}
	want := []string{"203.0.113.128/28", "203.0.113.131/32", "203.0.113.144/28", "2001:db8::1:0/120"}
	if len(got) != len(want) {
		t.Fatalf("routes %v, want %v", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("routes %v, want %v", got, want)
		}
	}
	_, _, _, drained := decideBGP("a", vips, []election.Node{{Name: "a", Cordoned: true}, {Name: "b"}}, nil)
	if !drained[netip.MustParsePrefix("203.0.113.128/28")] || !drained[netip.MustParsePrefix("2001:db8::1:0/120")] || drained[netip.MustParsePrefix("203.0.113.129/32")] {
		t.Errorf("drained %v: want the covering routes, not the VIPs' host routes", drained)
	}
}
