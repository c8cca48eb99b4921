package allocator

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
)

// Group is one IPGroup, parsed: its parts (the original's segment and the
// CIDRs and ranges of spec.addresses, of one or both families) minus excluded
// ranges, and who may use it.
type Group struct {
	Name string
	// Segment is the original's one CIDR; zero when the group has Ranges only.
	Segment netip.Prefix
	// Ranges are the parts of spec.addresses: inclusive ranges, a CIDR being
	// the range of its addresses (RangeOf). They may not overlap each other or
	// the segment: a doubly listed address is a mistake, not a wish.
	Ranges []Range
	// Excluded may hold single addresses (/32, /128) and ranges, of either
	// family; they need not be sorted, merged or inside a part: NewGroup clips
	// them to the parts, and one outside every part excludes nothing.
	Excluded []netip.Prefix
	// AvoidBuggyIPs skips the .0 and .255 address of every IPv4 /24 (MetalLB's
	// avoidBuggyIPs): old clients take them for network and broadcast addresses.
	AvoidBuggyIPs bool
	// AutoAssign lets Services that name no group take addresses from this one.
	AutoAssign bool
	// Priority orders auto-assign groups: lower is tried first, then by name.
	Priority int32
	// Admits reports whether a Service (by its namespace's labels and its own)
	// may use the group; nil admits every Service.
	Admits func(namespaceLabels, serviceLabels map[string]string) bool
	// ClusterPolicyOnly groups give addresses only to Services with
	// externalTrafficPolicy Cluster: each node advertises one route covering
	// many VIPs (the IPGroup's aggregationLength), which draws a VIP's traffic
	// to nodes with no endpoint of a Local Service.
	ClusterPolicyOnly bool
	// L2 groups are announced on layer 2: the network and broadcast addresses
	// of the node subnets they announce on are reserved for them.
	L2 bool

	parts    []span // sorted, disjoint: the segment and the ranges
	excluded []span // sorted, merged, clipped to the parts
	free     []span // parts minus excluded, sorted (anycast and buggy still in)
}

// Range is an inclusive range of addresses of one family.
type Range struct{ First, Last netip.Addr }

// RangeOf is the range of p's addresses.
func RangeOf(p netip.Prefix) Range { return Range{p.Masked().Addr(), LastAddr(p)} }

func (r Range) String() string {
	if r.First == r.Last {
		return r.First.String()
	}
	return r.First.String() + "-" + r.Last.String()
}

// span is an inclusive address range.
type span struct{ first, last netip.Addr }

// NewGroup validates g and prepares its lookup structures.
func NewGroup(g Group) (*Group, error) {
	g.parts, g.excluded, g.free = nil, nil, nil
	if g.Segment.IsValid() {
		g.Segment = g.Segment.Masked()
		g.parts = append(g.parts, span{g.Segment.Addr(), LastAddr(g.Segment)})
	}
	for _, r := range g.Ranges {
		switch {
		case !r.First.IsValid() || !r.Last.IsValid() || r.First.Zone() != "" || r.Last.Zone() != "" || r.First.Is4In6() || r.Last.Is4In6():
			return nil, fmt.Errorf("group %q: addresses entry %s is not a range of IP addresses", g.Name, r)
		case r.First.Is4() != r.Last.Is4():
			return nil, fmt.Errorf("group %q: addresses entry %s mixes IPv4 and IPv6", g.Name, r)
		case r.Last.Less(r.First):
			return nil, fmt.Errorf("group %q: addresses entry %s ends before it starts", g.Name, r)
		}
		g.parts = append(g.parts, span{r.First, r.Last})
	}
	if len(g.parts) == 0 {
		return nil, fmt.Errorf("group %q: neither a segment nor addresses", g.Name)
	}
	slices.SortFunc(g.parts, func(a, b span) int { return a.first.Compare(b.first) })
	for i := 1; i < len(g.parts); i++ {
		if g.parts[i].first.Compare(g.parts[i-1].last) <= 0 {
			return nil, fmt.Errorf("group %q: parts %s and %s overlap", g.Name, g.parts[i-1], g.parts[i])
		}
	}
	for _, e := range g.Excluded {
		if !e.IsValid() {
			return nil, fmt.Errorf("group %q: excluded %s is not a CIDR", g.Name, e)
		}
		e = e.Masked()
		// An entry outside every part excludes nothing. The API server refuses
		// one outside the segment and the CIDR entries; near a range entry (in
		// its /8 or /112) it lets one pass that it cannot afford to test exactly.
		g.excluded = append(g.excluded, intersectSpans([]span{{e.Addr(), LastAddr(e)}}, g.parts)...)
	}
	g.excluded = mergeSpans(g.excluded)
	g.free = subtractSpans(g.parts, g.excluded)
	return &g, nil
}

func (s span) String() string { return Range{s.first, s.last}.String() }

// Families are the families the group hands out, IPv4 first.
func (g *Group) Families() []Family {
	var out []Family
	for _, p := range g.parts {
		if f := FamilyOf(p.first); !slices.Contains(out, f) {
			out = append(out, f)
		}
	}
	return out
}

// HasFamily reports whether the group has a part of family f.
func (g *Group) HasFamily(f Family) bool { return slices.Contains(g.Families(), f) }

// Parts are the group's parts as the fewest CIDRs that cover them exactly,
// for what is asked per prefix: overlap with other groups, node subnets.
func (g *Group) Parts() []netip.Prefix {
	var out []netip.Prefix
	for _, p := range g.parts {
		out = append(out, prefixesOf(p)...)
	}
	return out
}

// Overlaps reports whether a part of g overlaps a part of o.
func (g *Group) Overlaps(o *Group) bool { return len(intersectSpans(g.parts, o.parts)) > 0 }

// Contains reports whether addr is in a part, excluded or not.
func (g *Group) Contains(addr netip.Addr) bool {
	_, ok := spanAt(g.parts, addr)
	return ok
}

// IsExcluded reports whether addr is in one of the excluded ranges, or is an
// address avoidBuggyIPs skips.
func (g *Group) IsExcluded(addr netip.Addr) bool {
	_, ok := g.excludedSpanAt(addr)
	return ok || g.buggy(addr)
}

// buggy reports whether addr is a .0 or .255 address avoidBuggyIPs skips.
func (g *Group) buggy(addr netip.Addr) bool {
	if !g.AvoidBuggyIPs || !addr.Is4() {
		return false
	}
	last := addr.As4()[3]
	return last == 0 || last == 255
}

// Usable reports whether addr may be handed out from this group.
func (g *Group) Usable(addr netip.Addr) bool {
	return g.Contains(addr) && !g.IsExcluded(addr) && !SubnetRouterAnycast(addr)
}

// SubnetRouterAnycast reports whether addr is an IPv6 address whose interface
// identifier (its low 64 bits) is zero: the subnet-router anycast address of
// its /64 (RFC 4291 2.6.1). Every node that forwards, which Kubernetes nodes
// do, answers Neighbor Solicitations for it on the links of that /64, so as a
// VIP it would be answered by all of them at once. It is never handed out.
func SubnetRouterAnycast(addr netip.Addr) bool {
	if !addr.Is6() || addr.Is4In6() {
		return false
	}
	b := addr.As16()
	return [8]byte(b[8:]) == [8]byte{}
}

// Capacity is the number of usable addresses of every part: the parts minus
// their excluded ranges, minus the addresses never handed out (IPv6
// subnet-router anycast, the .0 and .255 avoidBuggyIPs skips). It is a big.Int
// because an IPv6 segment holds up to 2^128 addresses.
func (g *Group) Capacity() *big.Int {
	total := new(big.Int)
	for _, s := range g.free {
		total.Add(total, g.usableIn(s))
	}
	return total
}

// FamilyCapacity is Capacity counted over the parts of one family.
func (g *Group) FamilyCapacity(f Family) *big.Int {
	total := new(big.Int)
	for _, s := range g.free {
		if FamilyOf(s.first) == f {
			total.Add(total, g.usableIn(s))
		}
	}
	return total
}

// usableIn counts the addresses of s (free of excluded ranges) the group hands out.
func (g *Group) usableIn(s span) *big.Int {
	n := spanSize(s)
	if s.first.Is6() {
		return n.Sub(n, anycastsIn(s))
	}
	if g.AvoidBuggyIPs {
		n.Sub(n, big.NewInt(buggyIn(s)))
	}
	return n
}

// buggyIn counts the IPv4 addresses of s ending in .0 or .255.
func buggyIn(s span) int64 {
	f, l := int64(u32(s.first)), int64(u32(s.last))
	// multiples of 256 in [f, l], and addresses one below them in [f, l].
	zeros := l/256 - (f+255)/256 + 1
	maxes := (l+1)/256 - (f+1+255)/256 + 1
	return max(zeros, 0) + max(maxes, 0)
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

// anycastsIn counts the IPv6 addresses in s whose low 64 bits are zero: the
// multiples of 2^64 between its ends.
func anycastsIn(s span) *big.Int {
	first := new(big.Int).SetBytes(s.first.AsSlice())
	last := new(big.Int).SetBytes(s.last.AsSlice())
	firstBlock := first.Add(first, new(big.Int).Sub(new(big.Int).Lsh(big.NewInt(1), 64), big.NewInt(1))).Rsh(first, 64)
	lastBlock := last.Rsh(last, 64)
	n := lastBlock.Sub(lastBlock, firstBlock).Add(lastBlock, big.NewInt(1))
	if n.Sign() < 0 {
		return new(big.Int)
	}
	return n
}

// excludedSpanAt finds the excluded span holding addr by binary search.
func (g *Group) excludedSpanAt(addr netip.Addr) (span, bool) { return spanAt(g.excluded, addr) }

// firstOf is the lowest address of the group's parts of family f.
func (g *Group) firstOf(f Family) (netip.Addr, bool) {
	for _, p := range g.parts {
		if FamilyOf(p.first) == f {
			return p.first, true
		}
	}
	return netip.Addr{}, false
}

// nextUsable returns the first usable address at or after from, of from's
// family, jumping over gaps between parts and excluded ranges in one step
// each (a part is never enumerated).
func (g *Group) nextUsable(from netip.Addr) (netip.Addr, bool) {
	for from.IsValid() {
		i, _ := slices.BinarySearchFunc(g.free, from, func(s span, a netip.Addr) int { return s.last.Compare(a) })
		if i == len(g.free) || g.free[i].first.Is4() != from.Is4() {
			return netip.Addr{}, false
		}
		if from.Less(g.free[i].first) {
			from = g.free[i].first
		}
		if SubnetRouterAnycast(from) || g.buggy(from) {
			from = from.Next()
			continue
		}
		return from, true
	}
	return netip.Addr{}, false
}

// prefixesOf splits s into the fewest CIDRs that cover it exactly.
func prefixesOf(s span) []netip.Prefix {
	var out []netip.Prefix
	for first := s.first; first.IsValid() && !s.last.Less(first); {
		bits := first.BitLen()
		// The widest prefix starting at first that ends at or before s.last.
		for bits > 0 {
			p := netip.PrefixFrom(first, bits-1)
			if p.Masked().Addr() != first || s.last.Less(LastAddr(p)) {
				break
			}
			bits--
		}
		p := netip.PrefixFrom(first, bits)
		out = append(out, p)
		first = LastAddr(p).Next()
	}
	return out
}

func mergeSpans(spans []span) []span {
	slices.SortFunc(spans, func(a, b span) int { return a.first.Compare(b.first) })
	var out []span
	for _, s := range spans {
		if n := len(out); n > 0 && (s.first.Compare(out[n-1].last) <= 0 || s.first == out[n-1].last.Next()) {
			if out[n-1].last.Less(s.last) {
				out[n-1].last = s.last
			}
			continue
		}
		out = append(out, s)
	}
	return out
}

func spanSize(s span) *big.Int {
	first := new(big.Int).SetBytes(s.first.AsSlice())
	last := new(big.Int).SetBytes(s.last.AsSlice())
	return last.Sub(last, first).Add(last, big.NewInt(1))
}

// LastAddr is the highest address of p: its broadcast address for IPv4.
func LastAddr(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
