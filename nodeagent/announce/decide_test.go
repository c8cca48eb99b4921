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

	vipA, vipB := vipsWonBy(a, b)
	both := []netip.Addr{vipA, vipB} // as decide lists them: sorted
	slices.SortFunc(both, netip.Addr.Compare)
	vipBGP := addr("203.0.113.7")
	l2 := vipCandidacy{group: l2Group}

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
				ledger: announcedLedger(map[netip.Addr][]string{vipA: nil, vipB: {"b"}, vipBGP: nil}), peers: establishedWith("a", "b")},
			own: map[netip.Addr]string{vipA: "eth0"}, release: map[netip.Addr]string{},
			claim: []netip.Addr{vipA}, handOff: map[netip.Addr]string{},
			advertise: []netip.Addr{vipBGP}, record: recordIfPicked(vipBGP, []string{"a", "b"}, "a", []string{"a", "b"}),
			gained: []netip.Addr{vipA},
		},
		{
			desc: "the ledger names a already: nothing to claim, nothing gained",
			obs: observation{now: t0.Add(time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2},
				alive: []election.Node{a, b}, known: 2,
				ledger: announcedLedger(map[netip.Addr][]string{vipA: {"a"}, vipB: {"b"}})},
			own: map[netip.Addr]string{vipA: "eth0"}, release: map[netip.Addr]string{}, handOff: map[netip.Addr]string{},
			record: map[netip.Addr][]string{},
		},
		{
			desc: "b cordoned (planned move): a takes vipB, claims it and hands b's open connections back to b",
			obs: observation{now: t0.Add(2 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2, vipBGP: {group: bgpGroup}},
				alive: []election.Node{a, bCordoned}, known: 2,
				ledger: announcedLedger(map[netip.Addr][]string{vipA: {"a"}, vipB: {"b"}, vipBGP: nil}), peers: establishedWith("a", "b")},
			own: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"}, release: map[netip.Addr]string{},
			claim: []netip.Addr{vipB}, handOff: map[netip.Addr]string{vipB: "b"},
			advertise: []netip.Addr{vipBGP}, record: recordIfPicked(vipBGP, []string{"a", "b"}, "a", []string{"a"}),
			gained: []netip.Addr{vipB},
		},
		{
			desc: "the ledger now names a for vipB: the hand-off to b is remembered",
			obs: observation{now: t0.Add(3 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2},
				alive: []election.Node{a, bCordoned}, known: 2,
				ledger: announcedLedger(map[netip.Addr][]string{vipA: {"a"}, vipB: {"a"}})},
			own: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"}, release: map[netip.Addr]string{},
			handOff: map[netip.Addr]string{vipB: "b"}, record: map[netip.Addr][]string{},
		},
		{
			desc: "a drains (agent stopping, node leaving): it owns nothing, advertises nothing, answers both for the hand-over delay",
			obs: observation{now: t0.Add(4 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2, vipBGP: {group: bgpGroup}},
				alive: []election.Node{aDraining, b}, known: 2,
				ledger: announcedLedger(map[netip.Addr][]string{vipA: {"a"}, vipB: {"a"}, vipBGP: {"a", "b"}}), peers: establishedWith("a", "b")},
			own: map[netip.Addr]string{}, release: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"},
			handOff: map[netip.Addr]string{vipB: "b"},
			record:  recordIfPicked(vipBGP, []string{"a", "b"}, "a", []string{"b"}),
			lost:    both, requeue: 2 * time.Second,
		},
		{
			desc: "half-way through the hand-over: still answered, look again when it ends",
			obs: observation{now: t0.Add(5 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2},
				alive: []election.Node{aDraining, b}, known: 2, ledger: announcedLedger(map[netip.Addr][]string{vipA: {"b"}, vipB: {"b"}})},
			own: map[netip.Addr]string{}, release: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"},
			handOff: map[netip.Addr]string{vipB: "b"}, record: map[netip.Addr][]string{},
			requeue: time.Second,
		},
		{
			desc: "the hand-over is over: quiet, and no hand-off left",
			obs: observation{now: t0.Add(6 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2},
				alive: []election.Node{aDraining, b}, known: 2, ledger: announcedLedger(map[netip.Addr][]string{vipA: {"b"}, vipB: {"b"}})},
			own: map[netip.Addr]string{}, release: map[netip.Addr]string{}, handOff: map[netip.Addr]string{},
			record: map[netip.Addr][]string{},
		},
		{
			desc: "a back and b gone: a takes both; b is dead, so no hand-off",
			obs: observation{now: t0.Add(7 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2},
				alive: []election.Node{a}, known: 2, ledger: announcedLedger(map[netip.Addr][]string{vipA: {"b"}, vipB: {"b"}})},
			own: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"}, release: map[netip.Addr]string{},
			claim: both, handOff: map[netip.Addr]string{}, record: map[netip.Addr][]string{},
			gained: both,
		},
		{
			desc: "a cut off from most agents (sees 1 of 3): quiet on L2 at once, BGP still advertised",
			obs: observation{now: t0.Add(8 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2, vipB: l2, vipBGP: {group: bgpGroup}},
				alive: []election.Node{a}, known: 3,
				ledger: announcedLedger(map[netip.Addr][]string{vipA: {"a"}, vipB: {"a"}, vipBGP: nil}), peers: establishedWith("a")},
			own: map[netip.Addr]string{}, release: map[netip.Addr]string{vipA: "eth0", vipB: "eth0"}, handOff: map[netip.Addr]string{},
			advertise: []netip.Addr{vipBGP}, record: map[netip.Addr][]string{vipBGP: {"a"}},
			lost: both, requeue: 2 * time.Second,
		},
		{
			desc: "owned again before the hand-over ended: answered as owner, no longer releasing",
			obs: observation{now: t0.Add(9 * time.Second), vips: map[netip.Addr]vipCandidacy{vipA: l2},
				alive: []election.Node{a}, known: 2, ledger: announcedLedger(map[netip.Addr][]string{vipA: {"a"}})},
			own: map[netip.Addr]string{vipA: "eth0"}, release: map[netip.Addr]string{vipB: "eth0"}, handOff: map[netip.Addr]string{},
			record: map[netip.Addr][]string{}, gained: []netip.Addr{vipA}, requeue: time.Second,
		},
	}
	var m carryover
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

// vipsWonBy are two L2 VIPs, one that node a wins and one that node b wins
// while both are eligible (rendezvous hash), found rather than assumed.
func vipsWonBy(a, b election.Node) (vipA, vipB netip.Addr) {
	for i := 1; i < 255 && (!vipA.IsValid() || !vipB.IsValid()); i++ {
		vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i%100)})
		owner, _, _ := election.Owner(vip, election.Candidacy{}, []election.Node{a, b})
		if owner == "a" && !vipA.IsValid() {
			vipA = vip
		} else if owner == "b" && !vipB.IsValid() && vip != vipA {
			vipB = vip
		}
	}
	return vipA, vipB
}

// announcedLedger is the ledger of the VIPs of announcedBy, each with the
// nodes that announce it.
func announcedLedger(announcedBy map[netip.Addr][]string) map[netip.Addr]*paasv1.IP {
	out := map[netip.Addr]*paasv1.IP{}
	for vip, by := range announcedBy {
		out[vip] = &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(vip)}, Status: paasv1.IPStatus{AnnouncedBy: by}}
	}
	return out
}

// establishedWith is the BGPPeer router with a session up from each of nodes.
func establishedWith(nodes ...string) []paasv1.BGPPeer {
	p := paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"}}
	for _, n := range nodes {
		p.Status.Sessions = append(p.Status.Sessions, paasv1.BGPSession{Node: n, State: paasv1.SessionEstablished})
	}
	return []paasv1.BGPPeer{p}
}

// recordIfPicked is what a records for vip: its advertisers with a session
// up when the rendezvous hash over the alive agents picks self, else nothing.
func recordIfPicked(vip netip.Addr, alive []string, self string, up []string) map[netip.Addr][]string {
	if election.Pick(vip, alive) != self {
		return map[netip.Addr][]string{}
	}
	return map[netip.Addr][]string{vip: up}
}
