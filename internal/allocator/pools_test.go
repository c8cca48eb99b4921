package allocator

import (
	"errors"
	"net/netip"
	"slices"
	"testing"
)

// Pools with several parts: CIDRs and ranges of one or both
// families next to the original segment, avoidBuggyIPs.

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }

func rng(first, last string) Range { return Range{addr(first), addr(last)} }

func TestPartsCapacity(t *testing.T) {
	for _, tc := range []struct {
		desc string
		g    Group
		want string // capacity
		fam  map[Family]string
	}{
		{desc: "a range and a CIDR", g: Group{Ranges: []Range{rng("192.0.2.20", "192.0.2.30"), RangeOf(pfx("198.51.100.0/28"))}}, want: "27"},
		{desc: "a one-address range", g: Group{Ranges: []Range{rng("192.0.2.20", "192.0.2.20")}}, want: "1"},
		{desc: "segment plus addresses", g: Group{Segment: pfx("192.0.2.0/28"), Ranges: []Range{rng("192.0.2.100", "192.0.2.109")}}, want: "26"},
		{desc: "excludedIPs apply to every part", g: Group{Segment: pfx("192.0.2.0/28"), Ranges: []Range{rng("192.0.2.100", "192.0.2.109")},
			Excluded: pfxs("192.0.2.1", "192.0.2.100", "192.0.2.96/30", "198.51.100.1")}, want: "24"},
		{desc: "an excluded CIDR across two parts and the gap", g: Group{Ranges: []Range{rng("192.0.2.10", "192.0.2.19"), rng("192.0.2.30", "192.0.2.39")},
			Excluded: pfxs("192.0.2.16/28")}, want: "14"},
		{desc: "dual-stack", g: Group{Segment: pfx("192.0.2.0/28"), Ranges: []Range{rng("2001:db8::10", "2001:db8::1f")}},
			want: "32", fam: map[Family]string{IPv4: "16", IPv6: "16"}},
		{desc: "IPv6 range across a /64 boundary skips the anycast address", g: Group{Ranges: []Range{rng("2001:db8:0:0:ffff:ffff:ffff:fffe", "2001:db8:0:1::1")}}, want: "3"},
		{desc: "avoidBuggyIPs: a /24 loses two", g: Group{Segment: pfx("192.0.2.0/24"), AvoidBuggyIPs: true}, want: "254"},
		{desc: "avoidBuggyIPs: a /22 loses eight", g: Group{Segment: pfx("10.0.0.0/22"), AvoidBuggyIPs: true}, want: "1016"},
		{desc: "avoidBuggyIPs: a range across a /24 boundary", g: Group{Ranges: []Range{rng("10.0.0.250", "10.0.1.5")}, AvoidBuggyIPs: true}, want: "10"},
		{desc: "avoidBuggyIPs: a range without .0 or .255", g: Group{Ranges: []Range{rng("10.0.0.1", "10.0.0.254")}, AvoidBuggyIPs: true}, want: "254"},
		{desc: "avoidBuggyIPs: an excluded .255 is not taken off twice", g: Group{Segment: pfx("192.0.2.0/24"), Excluded: pfxs("192.0.2.255", "192.0.2.1"), AvoidBuggyIPs: true}, want: "253"},
		{desc: "avoidBuggyIPs leaves IPv6 alone", g: Group{Segment: pfx("2001:db8::/120"), AvoidBuggyIPs: true}, want: "255"},
	} {
		tc.g.Name = "g"
		g := mustGroup(t, tc.g)
		if got := g.Capacity().String(); got != tc.want {
			t.Errorf("%s: capacity %s, want %s", tc.desc, got, tc.want)
		}
		for f, want := range tc.fam {
			if got := g.FamilyCapacity(f).String(); got != want {
				t.Errorf("%s: %s capacity %s, want %s", tc.desc, f, got, want)
			}
		}
	}
}

// Counting must agree with handing out: allocate everything, count it.
func TestPartsHandOutExactlyCapacity(t *testing.T) {
	g := Group{Name: "g", AutoAssign: true, AvoidBuggyIPs: true, Segment: pfx("192.0.2.248/29"),
		Ranges:   []Range{rng("198.51.100.250", "198.51.101.3"), RangeOf(pfx("203.0.113.0/30"))},
		Excluded: pfxs("198.51.100.252", "203.0.113.2")}
	a := New()
	parsed := mustGroup(t, g)
	a.SetGroups([]*Group{parsed})
	var got []string
	for i := 0; ; i++ {
		out, err := a.Allocate(string(rune('a'+i)), Request{Families: v4})
		if err != nil {
			if !errors.Is(err, ErrGroupFull) {
				t.Fatal(err)
			}
			break
		}
		got = append(got, out[0].String())
	}
	want := []string{"192.0.2.248", "192.0.2.249", "192.0.2.250", "192.0.2.251", "192.0.2.252", "192.0.2.253", "192.0.2.254",
		"198.51.100.250", "198.51.100.251", "198.51.100.253", "198.51.100.254", "198.51.101.1", "198.51.101.2", "198.51.101.3",
		"203.0.113.1", "203.0.113.3"}
	if !slices.Equal(got, want) {
		t.Fatalf("handed out %v\nwant       %v", got, want)
	}
	if parsed.Capacity().Int64() != int64(len(want)) || a.InUse(parsed) != len(want) {
		t.Fatalf("capacity %s, in use %d, handed out %d", parsed.Capacity(), a.InUse(parsed), len(want))
	}
}

func TestPartsScenario(t *testing.T) {
	pool := Group{Name: "pool", AutoAssign: true, Ranges: []Range{rng("192.0.2.20", "192.0.2.21"), RangeOf(pfx("198.51.100.0/31"))}}
	dual := Group{Name: "dual", AutoAssign: true, Priority: 5, Segment: pfx("203.0.113.0/30"), Ranges: []Range{RangeOf(pfx("2001:db8::/126"))}}
	v6only := Group{Name: "v6only", AutoAssign: true, Priority: 1, Segment: pfx("2001:db8:1::/126")}
	buggy := Group{Name: "buggy", AutoAssign: false, Segment: pfx("10.0.0.0/24"), AvoidBuggyIPs: true}
	runSteps(t, []step{
		{desc: "the first part first", groups: []Group{pool}, key: "a", req: Request{Families: v4}, want: []string{"192.0.2.20"}},
		{desc: "then the rest of it", key: "b", req: Request{Families: v4}, want: []string{"192.0.2.21"}},
		{desc: "then the next part, over the gap", key: "c", req: Request{Families: v4}, want: []string{"198.51.100.0"}},
		{desc: "a request in the second part", key: "d", req: Request{Families: v4, IPs: addrs("198.51.100.1")}, want: []string{"198.51.100.1"}},
		{desc: "a request in the gap is outside every group", key: "e", req: Request{Families: v4, IPs: addrs("192.0.2.50")}, wantErr: ErrOutsideGroups},
		{desc: "full across all parts", key: "e", req: Request{Families: v4}, wantErr: ErrGroupFull},
		{desc: "releasing in the first part frees it for the next", key: "a", release: true},
		{desc: "the freed address is handed out again", key: "e", req: Request{Families: v4}, want: []string{"192.0.2.20"}},

		{desc: "a dual-stack Service takes both families from the dual-stack group, before a v6-only group of better priority",
			groups: []Group{pool, dual, v6only}, key: "ds", req: Request{Families: dual4first}, want: []string{"203.0.113.0", "2001:db8::1"}},
		{desc: "a v6-only Service keeps the priority order", key: "six", req: Request{Families: v6}, want: []string{"2001:db8:1::1"}},
		{desc: "a v4-only Service keeps the priority order (pool is full)", key: "four", req: Request{Families: v4}, want: []string{"203.0.113.1"}},
		{desc: "IPv6 first is answered in that order", key: "ds6", req: Request{Families: []Family{IPv6, IPv4}}, want: []string{"2001:db8::2", "203.0.113.2"}},
		{desc: "a dual-stack group named for one family serves it", key: "named", req: Request{Families: v6, Groups: []string{"dual"}}, want: []string{"2001:db8::3"}},

		{desc: "avoidBuggyIPs: .0 is never handed out", groups: []Group{buggy}, key: "bug", req: Request{Families: v4, Groups: []string{"buggy"}}, want: []string{"10.0.0.1"}},
		{desc: "avoidBuggyIPs: a request for .255 is refused as excluded", key: "bug2", req: Request{Families: v4, IPs: addrs("10.0.0.255")}, wantErr: ErrExcluded},
		{desc: "avoidBuggyIPs: a request for .0 is refused as excluded", key: "bug2", req: Request{Families: v4, IPs: addrs("10.0.0.0")}, wantErr: ErrExcluded},
	})
}

var dual4first = []Family{IPv4, IPv6}

// Editing parts relocates as editing a segment does: a key on an address no
// part holds any more moves to the next free one, keeping it when none is free.
func TestPartsEditRelocates(t *testing.T) {
	before := Group{Name: "g", AutoAssign: true, Ranges: []Range{rng("192.0.2.20", "192.0.2.21"), rng("198.51.100.10", "198.51.100.10")}}
	dropped := Group{Name: "g", AutoAssign: true, Ranges: []Range{rng("192.0.2.20", "192.0.2.21"), rng("203.0.113.5", "203.0.113.5")}}
	shrunk := Group{Name: "g", AutoAssign: true, Ranges: []Range{rng("203.0.113.5", "203.0.113.5")}}
	buggy := Group{Name: "g", AutoAssign: true, Segment: pfx("10.0.0.0/24")}
	buggyOn := buggy
	buggyOn.AvoidBuggyIPs = true
	runSteps(t, []step{
		{desc: "a fills the first part", groups: []Group{before}, key: "a", req: Request{Families: v4}, want: []string{"192.0.2.20"}},
		{desc: "b", key: "b", req: Request{Families: v4}, want: []string{"192.0.2.21"}},
		{desc: "c takes the second part", key: "c", req: Request{Families: v4}, want: []string{"198.51.100.10"}},
		{desc: "the second part is replaced: c moves to the new one", groups: []Group{dropped}, key: "c", req: Request{Families: v4}, want: []string{"203.0.113.5"}},
		{desc: "a and b stay", key: "a", req: Request{Families: v4}, want: []string{"192.0.2.20"}},
		{desc: "the first part is dropped and nothing is free: a keeps its address", groups: []Group{shrunk}, key: "a", req: Request{Families: v4},
			want: []string{"192.0.2.20"}, wantErr: ErrCannotRelocate},
		{desc: "d holds .0 of a /24", groups: []Group{buggy}, key: "d", req: Request{Families: v4}, want: []string{"10.0.0.0"}},
		{desc: "avoidBuggyIPs turned on moves it", groups: []Group{buggyOn}, key: "d", req: Request{Families: v4}, want: []string{"10.0.0.1"}},
	})
}

func TestParts(t *testing.T) {
	g := mustGroup(t, Group{Name: "g", Segment: pfx("192.0.2.0/28"), Ranges: []Range{rng("198.51.100.3", "198.51.100.10"), RangeOf(pfx("2001:db8::/120"))}})
	var got []string
	for _, p := range g.Parts() {
		got = append(got, p.String())
	}
	want := []string{"192.0.2.0/28", "198.51.100.3/32", "198.51.100.4/30", "198.51.100.8/31", "198.51.100.10/32", "2001:db8::/120"}
	if !slices.Equal(got, want) {
		t.Fatalf("parts %v, want %v", got, want)
	}
	if fams := g.Families(); !slices.Equal(fams, []Family{IPv4, IPv6}) {
		t.Fatalf("families %v", fams)
	}
}

// Reserved addresses are counted over every part, once: an excluded or
// avoided (.0, .255) address is not counted again as reserved.
func TestPartsReservedCount(t *testing.T) {
	g := mustGroup(t, Group{Name: "g", AutoAssign: true, AvoidBuggyIPs: true, Segment: pfx("192.0.2.0/24"),
		Ranges: []Range{rng("198.51.100.250", "198.51.101.5"), RangeOf(pfx("2001:db8::/120"))}, Excluded: pfxs("192.0.2.7")})
	a := New()
	a.SetGroups([]*Group{g})
	a.SetReserved([]Reservation{
		{Prefix: pfx("192.0.2.0/29"), Holder: "pods"},        // 8, minus .0 (avoided) and .7 (excluded)
		{Prefix: pfx("198.51.101.0/30"), Holder: "services"}, // 4, minus .0 (avoided)
		{Prefix: pfx("2001:db8::5"), Holder: "a Node"},       // 1
		{Prefix: pfx("203.0.113.1"), Holder: "elsewhere"},    // outside every part
	})
	if got := a.ReservedCount(g).String(); got != "10" {
		t.Fatalf("reserved %s, want 6 + 3 + 1 = 10", got)
	}
	if _, err := a.Allocate("k", Request{Families: v4}); err != nil {
		t.Fatal(err)
	}
	if got := a.Held("k"); len(got) != 1 || got[0] != addr("192.0.2.8") {
		t.Fatalf("first free %v, want 192.0.2.8 (past the reserved /29)", got)
	}
}
