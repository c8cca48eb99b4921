package allocator

import (
	"fmt"
	"math/big"
	"net/netip"
	"slices"
)

// Group is one IPGroup, parsed: a segment minus excluded ranges, and who may use it.
type Group struct {
	Name    string
	Segment netip.Prefix
	// Excluded may hold single addresses (/32, /128) and ranges; they need not be
	// sorted, merged or inside the segment: NewGroup normalises them.
	Excluded []netip.Prefix
	// AutoAssign lets Services that name no group take addresses from this one.
	AutoAssign bool
	// Priority orders auto-assign groups: lower is tried first, then by name.
	Priority int32
	// Admits reports whether a Service (by its namespace's labels and its own)
	// may use the group; nil admits every Service.
	Admits func(namespaceLabels, serviceLabels map[string]string) bool
	// L2 groups are announced on layer 2: the network and broadcast addresses
	// of the node subnets they announce on are reserved for them.
	L2 bool

	excluded []span // sorted, merged, clipped to Segment
	last     netip.Addr
}

// span is an inclusive address range.
type span struct{ first, last netip.Addr }

// NewGroup validates g and prepares its lookup structures.
func NewGroup(g Group) (*Group, error) {
	if !g.Segment.IsValid() {
		return nil, fmt.Errorf("group %q: segment is not a valid CIDR", g.Name)
	}
	g.Segment = g.Segment.Masked()
	g.last = LastAddr(g.Segment)
	g.excluded = nil
	for _, e := range g.Excluded {
		if !e.IsValid() || e.Addr().Is4() != g.Segment.Addr().Is4() {
			return nil, fmt.Errorf("group %q: excluded %s is not of the segment's family", g.Name, e)
		}
		e = e.Masked()
		if !g.Segment.Overlaps(e) {
			return nil, fmt.Errorf("group %q: excluded %s is outside segment %s", g.Name, e, g.Segment)
		}
		s := span{e.Addr(), LastAddr(e)}
		// Clip to the segment: an excluded range may be wider than the segment.
		if s.first.Less(g.Segment.Addr()) {
			s.first = g.Segment.Addr()
		}
		if g.last.Less(s.last) {
			s.last = g.last
		}
		g.excluded = append(g.excluded, s)
	}
	g.excluded = mergeSpans(g.excluded)
	return &g, nil
}

// Family is "IPv4" or "IPv6", the spelling Kubernetes uses in spec.ipFamilies.
func (g *Group) Family() Family { return FamilyOf(g.Segment.Addr()) }

// Contains reports whether addr is in the segment, excluded or not.
func (g *Group) Contains(addr netip.Addr) bool { return g.Segment.Contains(addr) }

// IsExcluded reports whether addr is in one of the excluded ranges.
func (g *Group) IsExcluded(addr netip.Addr) bool {
	_, ok := g.excludedSpanAt(addr)
	return ok
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

// Capacity is the number of usable addresses: the segment minus its excluded
// ranges and, for IPv6, minus the subnet-router anycast addresses it never
// hands out. It is a big.Int because an IPv6 segment holds up to 2^128 addresses.
func (g *Group) Capacity() *big.Int {
	whole := span{first: g.Segment.Masked().Addr(), last: LastAddr(g.Segment)}
	total := spanSize(whole)
	if g.Family() == IPv6 {
		total.Sub(total, anycastsIn(whole))
	}
	for _, s := range g.excluded {
		total.Sub(total, spanSize(s))
		if g.Family() == IPv6 {
			total.Add(total, anycastsIn(s)) // already taken off with the segment's
		}
	}
	return total
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

// nextUsable returns the first usable address at or after from, skipping
// excluded ranges in one step each (a segment is never enumerated).
func (g *Group) nextUsable(from netip.Addr) (netip.Addr, bool) {
	for from.IsValid() && g.Segment.Contains(from) {
		s, ok := g.excludedSpanAt(from)
		switch {
		case ok:
			from = s.last.Next()
		case SubnetRouterAnycast(from):
			from = from.Next()
		default:
			return from, true
		}
	}
	return netip.Addr{}, false
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
