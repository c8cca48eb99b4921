package v1

import (
	"net/netip"
	"strings"
)

// DescribeParts names the group's parts as the spec writes them, for
// messages: "segment 192.0.2.0/24, addresses 198.51.100.10-198.51.100.20".
func (s *IPGroupSpec) DescribeParts() string {
	var parts []string
	if s.Segment != "" {
		parts = append(parts, "segment "+s.Segment)
	}
	if len(s.Addresses) > 0 {
		parts = append(parts, "addresses "+strings.Join(s.Addresses, ", "))
	}
	return strings.Join(parts, ", ")
}

// CoveringBits is the length of the covering route s's group advertises for
// vip (0: the host route): announce.bgp's aggregation length of vip's family,
// made longer where needed so that the route lies inside the part of the
// group that holds vip (the segment, a CIDR or a range of addresses). A route
// wider than the group would draw traffic for addresses that are not its own.
func (s *IPGroupSpec) CoveringBits(vip netip.Addr) int {
	vip = vip.Unmap()
	if s.Announce == nil {
		return 0
	}
	bits := s.Announce.BGP.AggregationBits(vip)
	if bits <= 0 || bits >= vip.BitLen() {
		return 0
	}
	entries := s.Addresses
	if s.Segment != "" {
		entries = append([]string{s.Segment}, entries...)
	}
	for _, e := range entries {
		first, last, ok := partRange(e)
		if !ok || first.Is4() != vip.Is4() || vip.Less(first) || last.Less(vip) {
			continue
		}
		for b := bits; b < vip.BitLen(); b++ {
			route := netip.PrefixFrom(vip, b).Masked()
			if !route.Addr().Less(first) && !last.Less(lastOf(route)) {
				return b
			}
		}
		return 0
	}
	return 0
}

// partRange is the first and last address of a segment or addresses entry:
// a CIDR (192.0.2.0/28) or a range (192.0.2.20-192.0.2.30).
func partRange(e string) (first, last netip.Addr, ok bool) {
	if p, err := netip.ParsePrefix(strings.TrimSpace(e)); err == nil {
		p = p.Masked()
		return p.Addr().Unmap(), lastOf(p).Unmap(), true
	}
	f, l, found := strings.Cut(e, "-")
	if !found {
		return first, last, false
	}
	first, err1 := netip.ParseAddr(strings.TrimSpace(f))
	last, err2 := netip.ParseAddr(strings.TrimSpace(l))
	return first.Unmap(), last.Unmap(), err1 == nil && err2 == nil
}

// lastOf is the last address of p.
func lastOf(p netip.Prefix) netip.Addr {
	b := p.Masked().Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	a, _ := netip.AddrFromSlice(b)
	return a
}
