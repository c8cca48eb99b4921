package allocator

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
)

func mustGroup(t *testing.T, g Group) *Group {
	t.Helper()
	out, err := NewGroup(g)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func pfx(s string) netip.Prefix {
	if p, err := netip.ParsePrefix(s); err == nil {
		return p
	}
	a := netip.MustParseAddr(s)
	return netip.PrefixFrom(a, a.BitLen())
}

func pfxs(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, pfx(s))
	}
	return out
}

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

var v4, v6, dual = []Family{IPv4}, []Family{IPv6}, []Family{IPv4, IPv6}

// step is one action on a shared allocator; steps build on each other.
type step struct {
	desc    string
	groups  []Group           // when set, SetGroups before the action
	reserve []Reservation     // when set (even empty), SetReserved before the action
	onLAN   map[string]string // SetInUseOnLAN each before the action, who being the MAC too ("" clears)
	key     string
	assign  []string // Assign these instead of Allocate
	release bool     // Release key instead of Allocate
	req     Request
	want    []string // addresses key holds afterwards
	wantErr error
}

func runSteps(t *testing.T, steps []step) {
	t.Helper()
	a := New()
	for i, s := range steps {
		if s.groups != nil {
			var gs []*Group
			for _, g := range s.groups {
				gs = append(gs, mustGroup(t, g))
			}
			a.SetGroups(gs)
		}
		if s.reserve != nil {
			a.SetReserved(s.reserve)
		}
		for addr, who := range s.onLAN {
			a.SetInUseOnLAN(netip.MustParseAddr(addr), who, who)
		}
		var err error
		var got []netip.Addr
		switch {
		case s.assign != nil:
			err = a.Assign(s.key, addrs(s.assign...)...)
			got = a.Held(s.key)
		case s.release:
			a.Release(s.key)
			got = a.Held(s.key)
		default:
			got, err = a.Allocate(s.key, s.req)
		}
		if s.wantErr == nil && err != nil {
			t.Fatalf("step %d %q: unexpected error %v", i, s.desc, err)
		}
		if s.wantErr != nil && !errors.Is(err, s.wantErr) {
			t.Fatalf("step %d %q: error %v, want %v", i, s.desc, err, s.wantErr)
		}
		if !slices.Equal(got, addrs(s.want...)) {
			t.Fatalf("step %d %q: holds %v, want %v", i, s.desc, got, s.want)
		}
		checkNoDuplicates(t, a)
	}
}

// checkNoDuplicates verifies the indexes agree: every address's holders are
// the keys that hold it, and the holders of a shared address are one sharing
// group (never two sharing keys, never a key that does not share).
func checkNoDuplicates(t *testing.T, a *Allocator) {
	t.Helper()
	seen := map[netip.Addr][]string{}
	for key, held := range a.held {
		for _, addr := range held {
			if slices.Contains(seen[addr], key) {
				t.Fatalf("%s held twice by %s", addr, key)
			}
			seen[addr] = append(seen[addr], key)
		}
	}
	for addr, keys := range seen {
		holders := a.Holders(addr)
		if len(holders) != len(keys) || slices.ContainsFunc(keys, func(k string) bool { return !slices.Contains(holders, k) }) {
			t.Fatalf("%s: holders index says %v, held index says %v", addr, holders, keys)
		}
		for _, k := range holders[1:] {
			if !sameGroup(a.sharing[holders[0]], a.sharing[k]) {
				t.Fatalf("%s held by %s and %s, which are not one sharing group", addr, holders[0], k)
			}
		}
	}
	if len(seen) != len(a.owner) {
		t.Fatalf("owner index has %d addresses, held index %d", len(a.owner), len(seen))
	}
}

func TestOriginalIPGroup(t *testing.T) {
	orig := Group{Name: "192.0.2.0-24", Segment: pfx("192.0.2.0/24"), Excluded: pfxs("192.0.2.0", "192.0.2.255"), AutoAssign: true}
	runSteps(t, []step{
		{desc: "first free skips the excluded network address", groups: []Group{orig}, key: "ns/a", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
		{desc: "idempotent", key: "ns/a", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
		{desc: "next service gets the next address", key: "ns/b", req: Request{Families: v4}, want: []string{"192.0.2.2"}},
		{desc: "requested address", key: "ns/c", req: Request{Families: v4, IPs: addrs("192.0.2.100")}, want: []string{"192.0.2.100"}},
		{desc: "requested address held by another", key: "ns/d", req: Request{Families: v4, IPs: addrs("192.0.2.100")}, wantErr: ErrInUse},
		{desc: "requested excluded address", key: "ns/d", req: Request{Families: v4, IPs: addrs("192.0.2.255")}, wantErr: ErrExcluded},
		{desc: "requested address outside every group", key: "ns/d", req: Request{Families: v4, IPs: addrs("198.51.100.1")}, wantErr: ErrOutsideGroups},
		{desc: "request of the wrong family", key: "ns/d", req: Request{Families: v4, IPs: addrs("2001:db8::1")}, wantErr: ErrFamilyNotAllowed},
		{desc: "release frees the address", key: "ns/a", release: true},
		{desc: "the freed address is reused first", key: "ns/e", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
		{desc: "changing the request moves the service", key: "ns/b", req: Request{Families: v4, IPs: addrs("192.0.2.50")}, want: []string{"192.0.2.50"}},
		{desc: "its old address is free again", key: "ns/f", req: Request{Families: v4}, want: []string{"192.0.2.2"}},
		{desc: "a failed new request keeps the old address", key: "ns/b", req: Request{Families: v4, IPs: addrs("192.0.2.100")}, want: []string{"192.0.2.50"}, wantErr: ErrInUse},
	})
}

func TestExhaustionAndExclusions(t *testing.T) {
	small := Group{Name: "small", Segment: pfx("203.0.113.0/30"), Excluded: pfxs("203.0.113.1", "203.0.113.2"), AutoAssign: true}
	runSteps(t, []step{
		{desc: "first usable", groups: []Group{small}, key: "a", req: Request{Families: v4}, want: []string{"203.0.113.0"}},
		{desc: "jumps over the excluded pair", key: "b", req: Request{Families: v4}, want: []string{"203.0.113.3"}},
		{desc: "full", key: "c", req: Request{Families: v4}, wantErr: ErrGroupFull},
		{desc: "still full (hint remembers)", key: "c", req: Request{Families: v4}, wantErr: ErrGroupFull},
		{desc: "release one", key: "a", release: true},
		{desc: "the released one is found again", key: "c", req: Request{Families: v4}, want: []string{"203.0.113.0"}},
		{desc: "no IPv6 group", key: "d", req: Request{Families: v6}, wantErr: ErrNoGroup},
	})
}

func TestGroupSelection(t *testing.T) {
	onlyProd := func(ns, _ map[string]string) bool { return ns["env"] == "prod" }
	groups := []Group{
		{Name: "b-late", Segment: pfx("198.51.100.0/28"), AutoAssign: true, Priority: 10},
		{Name: "a-early", Segment: pfx("203.0.113.0/28"), AutoAssign: true, Priority: 1},
		{Name: "manual", Segment: pfx("192.0.2.0/28"), AutoAssign: false},
		{Name: "prod", Segment: pfx("192.0.2.128/28"), AutoAssign: true, Admits: onlyProd},
		{Name: "v6", Segment: pfx("2001:db8::/64"), AutoAssign: true},
	}
	prod := map[string]string{"env": "prod"}
	runSteps(t, []step{
		{desc: "lower priority first", groups: groups, key: "a", req: Request{Families: v4}, want: []string{"203.0.113.0"}},
		{desc: "named non-auto group", key: "b", req: Request{Families: v4, Groups: []string{"manual"}}, want: []string{"192.0.2.0"}},
		{desc: "requested IP in a non-auto group is fine", key: "c", req: Request{Families: v4, IPs: addrs("192.0.2.9")}, want: []string{"192.0.2.9"}},
		{desc: "named group that does not exist", key: "d", req: Request{Families: v4, Groups: []string{"nope"}}, wantErr: ErrNoGroup},
		{desc: "named group the service may not use", key: "d", req: Request{Families: v4, Groups: []string{"prod"}}, wantErr: ErrGroupNotAllowed},
		{desc: "named group admits prod namespace", key: "d", req: Request{Families: v4, Groups: []string{"prod"}, NamespaceLabels: prod}, want: []string{"192.0.2.128"}},
		{desc: "requested IP in a group the service may not use", key: "e", req: Request{Families: v4, IPs: addrs("192.0.2.130")}, wantErr: ErrGroupNotAllowed},
		{desc: "requested IP outside the named group", key: "e", req: Request{Families: v4, IPs: addrs("198.51.100.3"), Groups: []string{"manual"}}, wantErr: ErrGroupNotAllowed},
		{desc: "dual-stack gets one per family, in family order", key: "f", req: Request{Families: []Family{IPv6, IPv4}}, want: []string{"2001:db8::1", "203.0.113.1"}},
		{desc: "dual-stack turned single-stack releases the other family", key: "f", req: Request{Families: v4}, want: []string{"203.0.113.1"}},
		{desc: "one named group per family", key: "g", req: Request{Families: dual, Groups: []string{"manual", "v6"}}, want: []string{"192.0.2.1", "2001:db8::1"}},
		{desc: "the subnet-router anycast address is never requested", key: "i", req: Request{Families: v6, IPs: addrs("2001:db8::")}, wantErr: ErrExcluded},
		{desc: "named groups missing a family fail that family only", key: "h", req: Request{Families: dual, Groups: []string{"manual"}}, want: []string{"192.0.2.2"}, wantErr: ErrNoGroup},
	})
}

func TestHugeSegmentsAreNeverEnumerated(t *testing.T) {
	slash8 := Group{Name: "ten", Segment: pfx("10.0.0.0/8"), Excluded: pfxs("10.0.0.0/9"), AutoAssign: true}
	slash64 := Group{Name: "v6", Segment: pfx("2001:db8::/64"), Excluded: pfxs("2001:db8::/65", "2001:db8::8000:0:0:0"), AutoAssign: true}
	runSteps(t, []step{
		{desc: "a /8 minus a /9 starts after the /9", groups: []Group{slash8, slash64}, key: "a", req: Request{Families: v4}, want: []string{"10.128.0.0"}},
		{desc: "a /64 minus its lower half and one address", key: "b", req: Request{Families: v6}, want: []string{"2001:db8::8000:0:0:1"}},
		{desc: "a requested address deep inside a /64", key: "c", req: Request{Families: v6, IPs: addrs("2001:db8::ffff:ffff:ffff:fffe")}, want: []string{"2001:db8::ffff:ffff:ffff:fffe"}},
	})
	a := New()
	a.SetGroups([]*Group{mustGroup(t, slash8), mustGroup(t, slash64)})
	g, _ := a.Group("ten")
	if got := g.Capacity().String(); got != "8388608" {
		t.Fatalf("capacity of a /8 minus a /9 = %s, want 8388608", got)
	}
	g, _ = a.Group("v6")
	if got := g.Capacity().String(); got != "9223372036854775807" {
		t.Fatalf("capacity of a /64 minus a /65 and one address = %s", got)
	}
}

// TestRebuild imports what the cluster holds, conflicts included, then allocates around it.
func TestRebuild(t *testing.T) {
	g := Group{Name: "g", Segment: pfx("192.0.2.0/29"), AutoAssign: true}
	runSteps(t, []step{
		{desc: "import a held address", groups: []Group{g}, key: "old", assign: []string{"192.0.2.0", "192.0.2.2"}, want: []string{"192.0.2.0", "192.0.2.2"}},
		{desc: "import is idempotent", key: "old", assign: []string{"192.0.2.2"}, want: []string{"192.0.2.0", "192.0.2.2"}},
		{desc: "a second claim on the same address is refused", key: "dup", assign: []string{"192.0.2.2"}, want: nil, wantErr: ErrInUse},
		{desc: "an imported address outside every group is kept", key: "legacy", assign: []string{"198.51.100.7"}, want: []string{"198.51.100.7"}},
		{desc: "the holder keeps it while it requests it, and hears why", key: "legacy", req: Request{Families: v4, IPs: addrs("198.51.100.7")}, want: []string{"198.51.100.7"}, wantErr: ErrOutsideGroups},
		{desc: "new allocations avoid imported addresses", key: "new", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
		{desc: "and the next one", key: "new2", req: Request{Families: v4}, want: []string{"192.0.2.3"}},
		{desc: "an interrupted move left two addresses of one family", key: "moving", assign: []string{"192.0.2.4", "192.0.2.5"}, want: []string{"192.0.2.4", "192.0.2.5"}},
		{desc: "finishing the move to the requested one releases the other", key: "moving", req: Request{Families: v4, IPs: addrs("192.0.2.5")}, want: []string{"192.0.2.5"}},
		{desc: "the released one is free", key: "new3", req: Request{Families: v4}, want: []string{"192.0.2.4"}},
		{desc: "without a request the first imported address wins", key: "twice", assign: []string{"192.0.2.7", "192.0.2.6"}, want: []string{"192.0.2.7", "192.0.2.6"}},
		{desc: "and the extra one is released", key: "twice", req: Request{Families: v4}, want: []string{"192.0.2.7"}},
	})
}

func TestNewGroupRejects(t *testing.T) {
	for _, g := range []Group{
		{Name: "neither segment nor addresses"},
		{Name: "range of two families", Ranges: []Range{{addr("192.0.2.1"), addr("2001:db8::1")}}},
		{Name: "range ending before it starts", Ranges: []Range{{addr("192.0.2.9"), addr("192.0.2.1")}}},
		{Name: "invalid range", Ranges: []Range{{First: addr("192.0.2.1")}}},
		{Name: "ranges overlapping", Ranges: []Range{{addr("192.0.2.1"), addr("192.0.2.9")}, {addr("192.0.2.9"), addr("192.0.2.20")}}},
		{Name: "range inside the segment", Segment: pfx("192.0.2.0/24"), Ranges: []Range{RangeOf(pfx("192.0.2.16/28"))}},
	} {
		if _, err := NewGroup(g); err == nil {
			t.Errorf("%s: accepted", g.Name)
		}
	}
}

// The API server refuses an excluded entry outside the segment; what reaches
// the allocator anyway (near a range, or another family) excludes nothing.
func TestExcludedOutsideEveryPartExcludesNothing(t *testing.T) {
	for _, ex := range []string{"198.51.100.1", "2001:db8::1", "192.0.3.0/24"} {
		g := mustGroup(t, Group{Name: "g", Segment: pfx("192.0.2.0/24"), Excluded: pfxs(ex)})
		if g.Capacity().String() != "256" {
			t.Errorf("excluded %s: capacity %s, want 256", ex, g.Capacity())
		}
	}
}

func TestExcludedRangesMerge(t *testing.T) {
	g := mustGroup(t, Group{Name: "g", Segment: pfx("192.0.2.0/24"),
		Excluded: pfxs("192.0.2.0/25", "192.0.2.10", "192.0.2.128", "192.0.2.129", "192.0.0.0/16")})
	if len(g.excluded) != 1 || g.Capacity().Sign() != 0 {
		t.Fatalf("a /16 covering the segment excludes all of it: spans %v, capacity %s", g.excluded, g.Capacity())
	}
	g = mustGroup(t, Group{Name: "g", Segment: pfx("192.0.2.0/24"), Excluded: pfxs("192.0.2.128", "192.0.2.129", "192.0.2.0/25")})
	if len(g.excluded) != 1 || g.Capacity().String() != "126" {
		t.Fatalf("adjacent ranges merge: spans %v, capacity %s", g.excluded, g.Capacity())
	}
}

func TestErrorsNameTheFix(t *testing.T) {
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "ipg-a", Segment: pfx("192.0.2.0/31"), AutoAssign: true})})
	for i := range 2 {
		if _, err := a.Allocate(fmt.Sprint(i), Request{Families: v4}); err != nil {
			t.Fatal(err)
		}
	}
	_, err := a.Allocate("x", Request{Families: v4})
	want := "no free IPv4 address in IPGroup ipg-a (2 of 2 in use); add addresses to a group, create another group, or free an address"
	if err == nil || err.Error() != want {
		t.Fatalf("got %q, want %q", err, want)
	}
}

// BenchmarkAllocateSlash16 shows allocation stays O(1) amortised as a group fills.
func BenchmarkAllocateSlash16(b *testing.B) {
	g, _ := NewGroup(Group{Name: "g", Segment: pfx("10.0.0.0/16"), AutoAssign: true})
	for b.Loop() {
		a := New()
		a.SetGroups([]*Group{g})
		for i := range 3000 {
			if _, err := a.Allocate(fmt.Sprint(i), Request{Families: v4}); err != nil {
				b.Fatal(err)
			}
		}
	}
}

func TestSubnetRouterAnycastIsSkipped(t *testing.T) {
	// A /63 holds two /64s, each with its anycast address; the first /64 is
	// excluded, so the first address found is the second /64's anycast one.
	small := Group{Name: "v6", Segment: pfx("2001:db8::/63"), Excluded: pfxs("2001:db8::/64"), AutoAssign: true}
	runSteps(t, []step{
		{desc: "first free of 2001:db8:0:1::/64 is ::1 past its anycast address", groups: []Group{small}, key: "a", req: Request{Families: v6}, want: []string{"2001:db8:0:1::1"}},
	})
	for _, c := range []struct {
		addr string
		want bool
	}{{"2001:db8::", true}, {"2001:db8:0:1::", true}, {"2001:db8::1", false}, {"2001:db8::1:0:0:0", false}, {"192.0.2.0", false}, {"::ffff:192.0.2.0", false}} {
		if got := SubnetRouterAnycast(netip.MustParseAddr(c.addr)); got != c.want {
			t.Errorf("SubnetRouterAnycast(%s) = %v, want %v", c.addr, got, c.want)
		}
	}
}

// TestCapacity counts what can be handed out: IPv6 subnet-router anycast
// addresses are never handed out, so they are not capacity either, and one
// that is also excluded is not taken off twice.
func TestCapacity(t *testing.T) {
	for _, tc := range []struct {
		segment  string
		excluded []string
		want     string
	}{
		{segment: "192.0.2.0/24", want: "256"},
		{segment: "192.0.2.0/24", excluded: []string{"192.0.2.0/30"}, want: "252"},
		{segment: "2001:db8::/120", want: "255"},
		{segment: "2001:db8::100/120", want: "256"},
		{segment: "2001:db8::/64", want: "18446744073709551615"},
		{segment: "2001:db8::/63", want: "36893488147419103230"},
		{segment: "2001:db8::/63", excluded: []string{"2001:db8:0:1::/128"}, want: "36893488147419103230"},
		{segment: "2001:db8::/63", excluded: []string{"2001:db8:0:0:ffff:ffff:ffff:ffff/128"}, want: "36893488147419103229"},
		{segment: "2001:db8::/63", excluded: []string{"2001:db8::/64"}, want: "18446744073709551615"},
	} {
		g := mustGroup(t, Group{Name: "g", Segment: pfx(tc.segment), Excluded: pfxs(tc.excluded...), AutoAssign: true})
		if got := g.Capacity().String(); got != tc.want {
			t.Errorf("capacity of %s minus %v = %s, want %s", tc.segment, tc.excluded, got, tc.want)
		}
	}
}
