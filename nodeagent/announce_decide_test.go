package nodeagent

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
)

// TestDecide runs one agent ("a") through a sequence of passes; each step
// builds on the memory the previous one left, as Reconcile does.
func TestDecide(t *testing.T) {
	addr := netip.MustParseAddr
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	node := func(name, prefix string, draining, cordoned bool) election.Node {
		return election.Node{Name: name, Labels: labels.Set{"node": name}, Draining: draining, Cordoned: cordoned,
			Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix(prefix)}}}
	}
	a, b := node("a", "192.0.2.11/24", false, false), node("b", "192.0.2.12/24", false, false)
	aDraining := node("a", "192.0.2.11/24", true, false)
	bCordoned := node("b", "192.0.2.12/24", false, true)
	l2Group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "l2"}}
	bgpGroup := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp"},
		Spec: paasv1.IPGroupSpec{Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}}

	// Two L2 VIPs, one that node a wins and one that node b wins while both
	// are eligible (rendezvous hash), found rather than assumed.
	var vipA, vipB netip.Addr
	for i := 1; i < 255 && (!vipA.IsValid() || !vipB.IsValid()); i++ {
		vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i%100)})
		owner, _, _ := election.Owner(vip, election.Candidacy{}, []election.Node{a, b})
		if owner == "a" && !vipA.IsValid() {
			vipA = vip
		} else if owner == "b" && !vipB.IsValid() && vip != vipA {
			vipB = vip
		}
	}
	both := []netip.Addr{vipA, vipB} // as decide lists them: sorted
	slices.SortFunc(both, netip.Addr.Compare)
	vipBGP := addr("203.0.113.7")
	l2 := vipCandidacy{group: l2Group}
	ledger := func(announcedBy map[netip.Addr][]string) map[netip.Addr]*paasv1.IP {
		out := map[netip.Addr]*paasv1.IP{}
		for vip, by := range announcedBy {
			out[vip] = &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(vip)}, Status: paasv1.IPStatus{AnnouncedBy: by}}
		}
		return out
	}
	established := func(nodes ...string) []paasv1.BGPPeer {
		p := paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"}}
		for _, n := range nodes {
			p.Status.Sessions = append(p.Status.Sessions, paasv1.BGPSession{Node: n, State: paasv1.SessionEstablished})
		}
		return []paasv1.BGPPeer{p}
	}

	policy := announcerPolicy{self: "a", handoverDelay: 2 * time.Second, speaksBGP: true}
	steps := []struct {
		desc string
		obs  observation
		// what the pass decides
		own, release map[netip.Addr]string
		claim        []netip.Addr
		handOff      map[netip.Addr]string
		advertise    []netip.Addr
		record       map[netip.Addr][]string
		gained, lost []netip.Addr
		requeue      time.Duration
	}{
		{
			desc: "both alive: a owns and claims its VIP, advertises the BGP VIP, records nothing it does not pick",
			obs: observation{now: t0, vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2, vipBGP: {group: bgpGroup}},
				alive: []election.Node{a, b}, known: 2,
				ledger: ledger(map[netip.Addr][]string{vipA: nil, vipB: {"b"}, vipBGP: nil}), peers: established("a", "b")},
			own: map[netip.Addr]string{vipA: "eth0"}, release: map[netip.Addr]string{},
			claim: []netip.Addr{vipA}, handOff: map[netip.Addr]string{},
			advertise: []netip.Addr{vipBGP}, record: recordIfPicked(vipBGP, []string{"a", "b"}, "a", []string{"a", "b"}),
			gained: []netip.Addr{vipA},
		},
		{
			desc: "the ledger names a already: nothing to claim, nothing gained",
			obs: observation{now: t0.Add(time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2},
				alive: []election.Node{a, b}, known: 2,
				ledger: ledger(map[netip.Addr][]string{vipA: {"a"}, vipB: {"b"}})},
			own: map[netip.Addr]string{vipA: "eth0"}, release: map[netip.Addr]string{}, handOff: map[netip.Addr]string{},
			record: map[netip.Addr][]string{},
		},
		{
			desc: "b cordoned (planned move): a takes vipB, claims it and hands b's open connections back to b",
			obs: observation{now: t0.Add(2 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2, vipBGP: {group: bgpGroup}},
				alive: []election.Node{a, bCordoned}, known: 2,
				ledger: ledger(map[netip.Addr][]string{vipA: {"a"}, vipB: {"b"}, vipBGP: nil}), peers: established("a", "b")},
			own: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"}, release: map[netip.Addr]string{},
			claim: []netip.Addr{vipB}, handOff: map[netip.Addr]string{vipB: "b"},
			advertise: []netip.Addr{vipBGP}, record: recordIfPicked(vipBGP, []string{"a", "b"}, "a", []string{"a"}),
			gained: []netip.Addr{vipB},
		},
		{
			desc: "the ledger now names a for vipB: the hand-off to b is remembered",
			obs: observation{now: t0.Add(3 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2},
				alive: []election.Node{a, bCordoned}, known: 2,
				ledger: ledger(map[netip.Addr][]string{vipA: {"a"}, vipB: {"a"}})},
			own: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"}, release: map[netip.Addr]string{},
			handOff: map[netip.Addr]string{vipB: "b"}, record: map[netip.Addr][]string{},
		},
		{
			desc: "a drains (agent stopping, node leaving): it owns nothing, advertises nothing, answers both for the hand-over delay",
			obs: observation{now: t0.Add(4 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2, vipBGP: {group: bgpGroup}},
				alive: []election.Node{aDraining, b}, known: 2,
				ledger: ledger(map[netip.Addr][]string{vipA: {"a"}, vipB: {"a"}, vipBGP: {"a", "b"}}), peers: established("a", "b")},
			own: map[netip.Addr]string{}, release: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"},
			handOff: map[netip.Addr]string{vipB: "b"},
			record:  recordIfPicked(vipBGP, []string{"a", "b"}, "a", []string{"b"}),
			lost:    both, requeue: 2 * time.Second,
		},
		{
			desc: "half-way through the hand-over: still answered, look again when it ends",
			obs: observation{now: t0.Add(5 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2},
				alive: []election.Node{aDraining, b}, known: 2, ledger: ledger(map[netip.Addr][]string{vipA: {"b"}, vipB: {"b"}})},
			own: map[netip.Addr]string{}, release: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"},
			handOff: map[netip.Addr]string{vipB: "b"}, record: map[netip.Addr][]string{},
			requeue: time.Second,
		},
		{
			desc: "the hand-over is over: quiet, and no hand-off left",
			obs: observation{now: t0.Add(6 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2},
				alive: []election.Node{aDraining, b}, known: 2, ledger: ledger(map[netip.Addr][]string{vipA: {"b"}, vipB: {"b"}})},
			own: map[netip.Addr]string{}, release: map[netip.Addr]string{}, handOff: map[netip.Addr]string{},
			record: map[netip.Addr][]string{},
		},
		{
			desc: "a back and b gone: a takes both; b is dead, so no hand-off",
			obs: observation{now: t0.Add(7 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2},
				alive: []election.Node{a}, known: 2, ledger: ledger(map[netip.Addr][]string{vipA: {"b"}, vipB: {"b"}})},
			own: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"}, release: map[netip.Addr]string{},
			claim: both, handOff: map[netip.Addr]string{}, record: map[netip.Addr][]string{},
			gained: both,
		},
		{
			desc: "a cut off from most agents (sees 1 of 3): quiet on L2 at once, BGP still advertised",
			obs: observation{now: t0.Add(8 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2, vipBGP: {group: bgpGroup}},
				alive: []election.Node{a}, known: 3,
				ledger: ledger(map[netip.Addr][]string{vipA: {"a"}, vipB: {"a"}, vipBGP: nil}), peers: established("a")},
			own: map[netip.Addr]string{}, release: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"}, handOff: map[netip.Addr]string{},
			advertise: []netip.Addr{vipBGP}, record: map[netip.Addr][]string{vipBGP: {"a"}},
			lost: both, requeue: 2 * time.Second,
		},
		{
			desc: "owned again before the hand-over ended: answered as owner, no longer releasing",
			obs: observation{now: t0.Add(9 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2},
				alive: []election.Node{a}, known: 2, ledger: ledger(map[netip.Addr][]string{vipA: {"a"}})},
			own: map[netip.Addr]string{vipA: "eth0"}, release: map[netip.Addr]string{vipB: "eth0"}, handOff: map[netip.Addr]string{},
			record: map[netip.Addr][]string{}, gained: []netip.Addr{vipA}, requeue: time.Second,
		},
	}
	var m memory
	for _, s := range steps {
		var d decision
		d, m = decide(policy, s.obs, m)
		var advertised []netip.Addr
		for _, r := range d.advertise {
			advertised = append(advertised, r.Prefix.Addr())
		}
		for _, c := range []struct {
			what      string
			got, want any
			equal     bool
		}{
			{"own", d.own, s.own, maps.Equal(d.own, s.own)},
			{"release", d.release, s.release, maps.Equal(d.release, s.release)},
			{"claim", d.claim, s.claim, slices.Equal(d.claim, s.claim)},
			{"handOff", d.handOff, s.handOff, maps.Equal(d.handOff, s.handOff)},
			{"advertise", advertised, s.advertise, slices.Equal(advertised, s.advertise)},
			{"record", d.record.pruned, s.record, maps.EqualFunc(d.record.pruned, s.record, slices.Equal)},
			{"gained", d.gained, s.gained, slices.Equal(d.gained, s.gained)},
			{"lost", d.lost, s.lost, slices.Equal(d.lost, s.lost)},
			{"requeue", d.requeue, s.requeue, d.requeue == s.requeue},
		} {
			if !c.equal {
				t.Errorf("%s: %s = %v, want %v", s.desc, c.what, c.got, c.want)
			}
		}
	}
}

// recordIfPicked is what a records for vip: its advertisers with a session
// up when the rendezvous hash over the alive agents picks self, else nothing.
func recordIfPicked(vip netip.Addr, alive []string, self string, up []string) map[netip.Addr][]string {
	if election.Pick(vip, alive) != self {
		return map[netip.Addr][]string{}
	}
	return map[netip.Addr][]string{vip: up}
}

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
	routes, _, _ := decideBGP("a", vips, []election.Node{edge, other}, peers)
	if len(routes) != 1 || routes[0].Prefix != netip.PrefixFrom(vip, 128) || routes[0].LocalPref != pref ||
		!slices.Equal(routes[0].Peers, []string{"r2"}) || !slices.Equal(routes[0].Communities, []uint32{65000<<16 | 100}) {
		t.Errorf("routes of a selected node = %+v, want one /128 to r2 with local-pref 200 and 65000:100", routes)
	}
	if routes, _, _ := decideBGP("b", vips, []election.Node{edge, other}, peers); len(routes) != 0 {
		t.Errorf("routes of a node the group does not select = %+v, want none", routes)
	}
	// Whichever alive agent records the VIP, a's session to r2 (the group's
	// only peer) is not established, so nobody is recorded as advertising.
	for _, self := range []string{"a", "b"} {
		_, records, listed := decideBGP(self, vips, []election.Node{edge, other}, peers)
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
