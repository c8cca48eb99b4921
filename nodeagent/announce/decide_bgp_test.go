package announce

import (
	"maps"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
)

func TestDecideBGPRoutesFollowTheGroup(t *testing.T) {
	vip := netip.MustParseAddr("2001:db8::7")
	pref := uint32(200)
	g := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp"}, Spec: paasv1.IPGroupSpec{Announce: &paasv1.Announce{
		Mode: paasv1.AnnounceBGP, NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"edge": "true"}},
		BGP: &paasv1.BGPAnnounce{Peers: []string{"r2"}, LocalPref: &pref, Communities: []string{"65000:100"}}}}}
	c, ok := election.CandidacyOf(g)
	if !ok {
		t.Fatal("CandidacyOf: not announced")
	}
	edge := election.Node{Name: "a", Labels: labels.Set{"edge": "true"}}
	other := election.Node{Name: "b", Labels: labels.Set{}}
	vips := map[netip.Addr]vipCandidacy{vip: {Candidacy: c, group: g}}
	peers := []paasv1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "r1"}, Status: paasv1.BGPPeerStatus{Sessions: []paasv1.BGPSession{{Node: "a", State: paasv1.SessionEstablished}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "r2"}, Status: paasv1.BGPPeerStatus{Sessions: []paasv1.BGPSession{{Node: "a", State: "Active"}}}},
	}
	routes, _, _, _ := decideBGP("a", vips, []election.Node{edge, other}, peers)
	if len(routes) != 1 || routes[0].Prefix != netip.PrefixFrom(vip, 128) || routes[0].LocalPref != pref ||
		!slices.Equal(routes[0].Peers, []string{"r2"}) || !slices.Equal(routes[0].Communities, []uint32{65000<<16 | 100}) {
		t.Errorf("routes of a selected node = %+v, want one /128 to r2 with local-pref 200 and 65000:100", routes)
	}
	if routes, _, _, _ := decideBGP("b", vips, []election.Node{edge, other}, peers); len(routes) != 0 {
		t.Errorf("routes of a node the group does not select = %+v, want none", routes)
	}
	// Whichever alive agent records the VIP, a's session to r2 (the group's
	// only peer) is not established, so nobody is recorded as advertising.
	for _, self := range []string{"a", "b"} {
		_, records, listed, _ := decideBGP(self, vips, []election.Node{edge, other}, peers)
		if len(records) > 0 && len(records[vip]) != 0 {
			t.Errorf("%s records %v, want no advertiser (a's session to r2 is down)", self, records[vip])
		}
		if listed[vip] {
			t.Errorf("%s lists itself as advertising %s, with no session up to r2", self, vip)
		}
	}
}

// TestNextAnnouncedBy: every node writes only its own name into an IP's
// announcedBy; the one that prunes the VIP also drops the nodes no longer
// advertising it. No writer ever adds another node (an admission policy
// refuses that, config/admission/agent_status_entries.yaml).
func TestNextAnnouncedBy(t *testing.T) {
	for _, tc := range []struct {
		desc          string
		cur           []string
		listed, prune bool
		keep          []string
		want          []string
	}{
		{"first advertiser lists itself", nil, true, false, nil, []string{"a"}},
		{"a second one joins, sorted", []string{"b"}, true, false, nil, []string{"a", "b"}},
		{"already listed: unchanged", []string{"a", "b"}, true, false, nil, []string{"a", "b"}},
		{"stops advertising: leaves, others stay", []string{"a", "b"}, false, false, nil, []string{"b"}},
		{"the pruner drops a dead node", []string{"a", "b", "dead"}, true, true, []string{"a", "b"}, []string{"a", "b"}},
		{"the pruner never adds the nodes it keeps", []string{"a"}, true, true, []string{"a", "b", "c"}, []string{"a"}},
		{"the pruner that does not advertise drops itself too", []string{"a", "b"}, false, true, []string{"b"}, []string{"b"}},
		{"duplicates collapse", []string{"b", "b"}, false, false, nil, []string{"b"}},
	} {
		got := nextAnnouncedBy(tc.cur, "a", tc.listed, tc.prune, tc.keep)
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.desc, got, tc.want)
		}
		for _, n := range got {
			if n != "a" && !slices.Contains(tc.cur, n) {
				t.Errorf("%s: added another node %s", tc.desc, n)
			}
		}
	}
}

// TestBGPGracefulShutdown: passes of decideBGP then bgpGracefulShutdown on
// node a of three. Cordoned, a keeps advertising its routes, marked, for the
// delay, then withdraws them; uncordoned meanwhile, it advertises them
// unmarked at once; a VIP whose Service goes meanwhile, or that a would not
// carry anyway (a Local Service's endpoint gone from a), is withdrawn at
// once; with no delay, nothing is marked.
func TestBGPGracefulShutdown(t *testing.T) {
	g := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp"}, Spec: paasv1.IPGroupSpec{Announce: &paasv1.Announce{
		Mode: paasv1.AnnounceBGP, BGP: &paasv1.BGPAnnounce{Communities: []string{"65000:100"}}}}}
	c, ok := election.CandidacyOf(g)
	if !ok {
		t.Fatal("CandidacyOf: not announced")
	}
	v1, v2 := netip.MustParseAddr("203.0.113.1"), netip.MustParseAddr("203.0.113.2")
	both := map[netip.Addr]vipCandidacy{v1: {Candidacy: c, group: g}, v2: {Candidacy: c, group: g}}
	onlyV2 := map[netip.Addr]vipCandidacy{v2: {Candidacy: c, group: g}}
	// v1 no longer on a (a Local Service whose endpoint on a went), v2 as before
	notOnA := c
	notOnA.LocalNodes = map[string]bool{"b": true}
	v1Elsewhere := map[netip.Addr]vipCandidacy{v1: {Candidacy: notOnA, group: g}, v2: {Candidacy: c, group: g}}
	alive := func(cordoned bool) []election.Node {
		return []election.Node{{Name: "a", Cordoned: cordoned}, {Name: "b"}, {Name: "c"}}
	}
	const delay = 5 * time.Second
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

	type pass struct {
		at       time.Duration
		cordoned bool
		vips     map[netip.Addr]vipCandidacy
		delay    time.Duration
		// want: the routes advertised, by address, "m" for marked ("" unmarked)
		want    map[netip.Addr]string
		requeue time.Duration
	}
	for _, tc := range []struct {
		desc   string
		passes []pass
	}{
		{"cordoned: marked for the delay, then withdrawn", []pass{
			{0, false, both, delay, map[netip.Addr]string{v1: "", v2: ""}, 0},
			{time.Second, true, both, delay, map[netip.Addr]string{v1: "m", v2: "m"}, delay},
			{3 * time.Second, true, both, delay, map[netip.Addr]string{v1: "m", v2: "m"}, 3 * time.Second},
			{6 * time.Second, true, both, delay, map[netip.Addr]string{}, 0},
			{7 * time.Second, true, both, delay, map[netip.Addr]string{}, 0},
		}},
		{"uncordoned during the delay: unmarked at once", []pass{
			{0, false, both, delay, map[netip.Addr]string{v1: "", v2: ""}, 0},
			{time.Second, true, both, delay, map[netip.Addr]string{v1: "m", v2: "m"}, delay},
			{2 * time.Second, false, both, delay, map[netip.Addr]string{v1: "", v2: ""}, 0},
			// and cordoned again: a delay of its own
			{3 * time.Second, true, both, delay, map[netip.Addr]string{v1: "m", v2: "m"}, delay},
		}},
		{"a VIP gone during the delay: withdrawn at once, the other stays marked", []pass{
			{0, false, both, delay, map[netip.Addr]string{v1: "", v2: ""}, 0},
			{time.Second, true, both, delay, map[netip.Addr]string{v1: "m", v2: "m"}, delay},
			{2 * time.Second, true, onlyV2, delay, map[netip.Addr]string{v2: "m"}, 4 * time.Second},
		}},
		{"a VIP gone, the node not cordoned: withdrawn at once", []pass{
			{0, false, both, delay, map[netip.Addr]string{v1: "", v2: ""}, 0},
			{time.Second, false, onlyV2, delay, map[netip.Addr]string{v2: ""}, 0},
		}},
		{"not for a but the node not cordoned (its local endpoint gone): withdrawn at once", []pass{
			{0, false, both, delay, map[netip.Addr]string{v1: "", v2: ""}, 0},
			{time.Second, false, v1Elsewhere, delay, map[netip.Addr]string{v2: ""}, 0},
		}},
		{"cordoned, a VIP not for a anyway: only the other is marked", []pass{
			{0, false, both, delay, map[netip.Addr]string{v1: "", v2: ""}, 0},
			{time.Second, true, v1Elsewhere, delay, map[netip.Addr]string{v2: "m"}, delay},
		}},
		{"no delay: withdrawn at once", []pass{
			{0, false, both, 0, map[netip.Addr]string{v1: "", v2: ""}, 0},
			{time.Second, true, both, 0, map[netip.Addr]string{}, 0},
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var prev []bgp.Route
			var leaving map[netip.Prefix]leavingRoute
			for i, p := range tc.passes {
				want, _, _, drained := decideBGP("a", p.vips, alive(p.cordoned), nil)
				var routes []bgp.Route
				var requeue time.Duration
				routes, leaving, requeue = bgpGracefulShutdown(want, prev, leaving, drained, t0.Add(p.at), p.delay)
				prev = want
				got := map[netip.Addr]string{}
				for _, r := range routes {
					got[r.Prefix.Addr()] = map[bool]string{true: "m"}[r.GracefulShutdown]
					if !slices.Equal(r.Communities, []uint32{65000<<16 | 100}) {
						t.Errorf("pass %d: route %s lost its group's communities: %x", i, r.Prefix, r.Communities)
					}
				}
				if !maps.Equal(got, p.want) {
					t.Errorf("pass %d (at %s, cordoned %v): advertised %v, want %v", i, p.at, p.cordoned, got, p.want)
				}
				if requeue != p.requeue {
					t.Errorf("pass %d: next pass in %s, want %s", i, requeue, p.requeue)
				}
			}
		})
	}
}
