package announce

import (
	"net/netip"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// TestFailoverCause: the history entry a pass produces when node a takes a
// VIP over from b, for each cause, from what decide knows: the last pass's
// election, the ledger, and the alive nodes.
func TestFailoverCause(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	node := func(name string, mod func(*election.Node)) election.Node {
		n := election.Node{Name: name, Labels: labels.Set{"node": name}, Agent: true,
			Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.0/24")}}}
		if mod != nil {
			mod(&n)
		}
		return n
	}
	a, b, c := node("a", nil), node("b", nil), node("c", nil)
	draining := node("b", func(n *election.Node) { n.Draining = true })
	excluded := node("b", func(n *election.Node) { n.Excluded = true })
	cordoned := node("b", func(n *election.Node) { n.Cordoned = true })
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "l2"}}

	// A VIP b wins over a and c, and one a wins over b but c wins over a and b.
	var vip, vipC netip.Addr
	for i := 1; i < 255 && (!vip.IsValid() || !vipC.IsValid()); i++ {
		v := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		all, _, _ := election.Owner(v, election.Candidacy{}, []election.Node{a, b, c})
		ab, _, _ := election.Owner(v, election.Candidacy{}, []election.Node{a, b})
		bc, _, _ := election.Owner(v, election.Candidacy{}, []election.Node{b, c})
		switch {
		case !vip.IsValid() && all == "b" && bc == "b":
			vip = v
		case !vipC.IsValid() && all == "c" && ab == "a" && bc == "c":
			vipC = v
		}
	}
	pass := func(v netip.Addr, alive []election.Node, announcedBy ...string) observation {
		return observation{now: t0.Add(time.Second), noticed: t0, vips: map[netip.Addr]vipCandidacy{v: {group: group}},
			alive: alive, known: 3,
			ledger: map[netip.Addr]*paasv1.IP{v: {ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(v)},
				Status: paasv1.IPStatus{AnnouncedBy: announcedBy}}}}
	}
	for _, tc := range []struct {
		desc    string
		vip     netip.Addr
		elected map[netip.Addr]string // the last pass's election (nil: none)
		obs     observation
		from    string // "": no entry
		cause   paasv1.FailoverCause
	}{
		{"b's agent died", vip, map[netip.Addr]string{vip: "b"}, pass(vip, []election.Node{a, c}, "b"), "b", paasv1.FailoverOwnerDead},
		{"b's agent died, as this agent's first pass sees it", vip, nil, pass(vip, []election.Node{a, c}, "b"), "b", paasv1.FailoverOwnerDead},
		{"b's agent stops, handing over", vip, map[netip.Addr]string{vip: "b"}, pass(vip, []election.Node{a, draining, c}, "b"), "b", paasv1.FailoverPlannedMove},
		{"b labelled excluded", vip, map[netip.Addr]string{vip: "b"}, pass(vip, []election.Node{a, excluded, c}, "b"), "b", paasv1.FailoverExcluded},
		{"b cordoned", vip, map[netip.Addr]string{vip: "b"}, pass(vip, []election.Node{a, cordoned, c}, "b"), "b", paasv1.FailoverExcluded},
		{"c died, a takes the VIP c had", vipC, map[netip.Addr]string{vipC: "c"},
			pass(vipC, []election.Node{a, b}, "c"), "c", paasv1.FailoverOwnerDead},
		{"a back in the majority: the ledger's b is what the election picks without a", vipC, nil,
			pass(vipC, []election.Node{a, b}, "b"), "b", paasv1.FailoverElectionChange},
		{"a back in the majority: the ledger names b, alive, but the election without a picks c", vipC, nil,
			pass(vipC, []election.Node{a, b, c}, "b"), "b", paasv1.FailoverConflict},
		{"the ledger names two other announcers", vip, map[netip.Addr]string{}, pass(vip, []election.Node{a, b, c}, "b", "c"), "b", paasv1.FailoverConflict},
		{"no node was eligible before, the ledger still names b", vip, map[netip.Addr]string{vip: ""}, pass(vip, []election.Node{a, b, c}, "b"), "b", paasv1.FailoverElectionChange},
		{"the VIP's first announcement", vip, nil, pass(vip, []election.Node{a, b, c}), "", ""},
		{"the ledger names a already", vip, nil, pass(vip, []election.Node{a, c}, "a"), "", ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got, ok := takeoverOf("a", tc.vip, tc.elected, tc.obs)
			if tc.from == "" {
				if ok {
					t.Fatalf("takeover %+v, want none", got)
				}
				return
			}
			want := takeover{from: tc.from, cause: tc.cause, noticed: t0}
			if !ok || got != want {
				t.Fatalf("takeover %+v (%v), want %+v", got, ok, want)
			}
		})
	}
	// The election-change case needs b alive and eligible with the last pass
	// electing it: a pass in which a's endpoints are the only ones (Local).
	t.Run("b alive and eligible loses the VIP to a Local Service's endpoints", func(t *testing.T) {
		o := pass(vip, []election.Node{a, b, c}, "b")
		o.vips[vip] = vipCandidacy{Candidacy: election.Candidacy{LocalNodes: map[string]bool{"a": true}}, group: group}
		got, ok := takeoverOf("a", vip, map[netip.Addr]string{vip: "b"}, o)
		if want := (takeover{from: "b", cause: paasv1.FailoverElectionChange, noticed: t0}); !ok || got != want {
			t.Fatalf("takeover %+v (%v), want %+v", got, ok, want)
		}
	})
}

// TestDecideTakeovers: decide remembers a takeover until its claim is
// written, and only for VIPs taken over from another node.
func TestDecideTakeovers(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := election.Node{Name: "a", Labels: labels.Set{}, Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.11/24")}}}
	b := election.Node{Name: "b", Labels: labels.Set{}, Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.12/24")}}}
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "l2"}}
	var vip netip.Addr
	for i := 1; !vip.IsValid(); i++ {
		v := netip.AddrFrom4([4]byte{192, 0, 2, byte(100 + i)})
		if owner, _, _ := election.Owner(v, election.Candidacy{}, []election.Node{a, b}); owner == "b" {
			vip = v
		}
	}
	obs := func(now time.Time, alive []election.Node, announcedBy ...string) observation {
		return observation{now: now, noticed: now.Add(-time.Millisecond), vips: map[netip.Addr]vipCandidacy{vip: {group: group}}, alive: alive, known: 2,
			ledger: map[netip.Addr]*paasv1.IP{vip: {Status: paasv1.IPStatus{AnnouncedBy: announcedBy}}}}
	}
	p := announcerPolicy{self: "a"}
	_, m := decide(p, obs(t0, []election.Node{a, b}, "b"), carryover{})
	d, m := decide(p, obs(t0.Add(time.Second), []election.Node{a}, "b"), m)
	want := takeover{from: "b", cause: paasv1.FailoverOwnerDead, noticed: t0.Add(time.Second - time.Millisecond)}
	if d.takeovers[vip] != want {
		t.Fatalf("b died: takeovers %v, want %v", d.takeovers, want)
	}
	// The claim failed: the next pass claims again, with the same takeover.
	d, m = decide(p, obs(t0.Add(2*time.Second), []election.Node{a}, "b"), m)
	if d.takeovers[vip] != want || len(d.claim) != 1 {
		t.Fatalf("claim retried: takeovers %v, claim %v, want %v", d.takeovers, d.claim, want)
	}
	// Written: forgotten.
	d, m = decide(p, obs(t0.Add(3*time.Second), []election.Node{a}, "a"), m)
	if len(d.takeovers) != 0 || len(m.takeovers) != 0 {
		t.Fatalf("claim written: takeovers %v %v, want none", d.takeovers, m.takeovers)
	}
	// A fresh agent claiming a VIP nobody announced: no takeover.
	d, _ = decide(p, obs(t0, []election.Node{a}), carryover{})
	if len(d.claim) != 1 || len(d.takeovers) != 0 {
		t.Fatalf("first announcement: claim %v, takeovers %v", d.claim, d.takeovers)
	}
}

// TestFailoverEntry: the entry's time is the notice (to the second, as the
// API keeps it), its gap runs to the first announcement, none when unsent.
func TestFailoverEntry(t *testing.T) {
	noticed := time.Date(2026, 1, 1, 0, 0, 0, 400_000_000, time.UTC)
	tk := takeover{from: "b", cause: paasv1.FailoverOwnerDead, noticed: noticed}
	e := failoverEntry(tk, "a", noticed.Add(35*time.Millisecond))
	want := paasv1.Failover{At: metav1.NewTime(noticed.Truncate(time.Second)), From: "b", To: "a", Cause: paasv1.FailoverOwnerDead, GapMilliseconds: ptr.To[int64](35)}
	if !e.At.Equal(&want.At) || e.From != want.From || e.To != want.To || e.Cause != want.Cause || *e.GapMilliseconds != 35 {
		t.Fatalf("entry %+v, want %+v", e, want)
	}
	if e := failoverEntry(tk, "a", time.Time{}); e.GapMilliseconds != nil {
		t.Fatalf("unsent announcement: gap %d, want none", *e.GapMilliseconds)
	}
}

// TestAppendHistory: the history keeps the last N entries, oldest first.
func TestAppendHistory(t *testing.T) {
	entry := func(i int) paasv1.Failover { return paasv1.Failover{From: "n" + string(rune('a'+i)), To: "x"} }
	var h []paasv1.Failover
	for i := range 12 {
		h = appendHistory(h, entry(i), 0)
	}
	if len(h) != DefaultHistoryLimit || h[0] != entry(2) || h[9] != entry(11) {
		t.Fatalf("default limit: %v", h)
	}
	orig := h
	h = appendHistory(h, entry(12), 3)
	if len(h) != 3 || h[0] != entry(10) || h[2] != entry(12) {
		t.Fatalf("limit 3: %v", h)
	}
	if orig[0] != entry(2) {
		t.Fatalf("appendHistory changed its input: %v", orig)
	}
	var big []paasv1.Failover
	for i := range 40 {
		big = appendHistory(big, entry(i%20), 1000)
	}
	if len(big) != MaxHistoryLimit {
		t.Fatalf("limit over the CRD's: %d entries, want %d", len(big), MaxHistoryLimit)
	}
}
