package allocator

import (
	"math/big"
	"net/netip"
	"slices"
	"strings"
)

// Reserved addresses: held by something else in the cluster (a Node, the
// Service CIDRs, the pod CIDRs, a node subnet's network and broadcast
// address). The allocator never hands one out, on request or by itself, but a
// key that already holds one keeps it: taking an address away is a decision
// for a person (the caller reports the conflict), and Assign imports whatever
// the cluster holds. Reservations are skipped a range at a time, like
// excluded ranges, so a Service CIDR of /12 inside a /8 group costs one step.

// Reservation is a range of addresses something else in the cluster holds.
type Reservation struct {
	Prefix netip.Prefix
	// Holder says what holds it, for messages: "the address of Node node1".
	Holder string
	// Kind labels the holder for the caller (it becomes a condition reason);
	// the allocator does not read it.
	Kind string
	// L2Only reservations apply only to groups announced on layer 2: the
	// network and broadcast address of a node subnet are answered by the
	// subnet's hosts, but routed (BGP, static) VIPs never meet them.
	L2Only bool
	// Node names the Node that claims the address itself (its
	// status.addresses, what its agent publishes of its interfaces): a claim
	// keeps a free address out of new
	// allocations, but a held address stays its holder's (Reserved skips
	// claims) and the claim is the claiming node's conflict (Claims). What a
	// node says about itself may only ever cost that node.
	Node string
}

// reservations is the parsed set: merged spans to skip and test in one binary
// search, and the reservations themselves to name a holder.
type reservations struct {
	all, l2 []span                       // merged: every group's, L2 groups' only
	hosts   map[netip.Addr][]Reservation // single addresses, the common case
	nets    []Reservation                // ranges, most specific first
}

// SetReserved replaces the reserved addresses. Held addresses stay held.
func (a *Allocator) SetReserved(rs []Reservation) {
	var r reservations
	r.hosts = map[netip.Addr][]Reservation{}
	for _, res := range rs {
		if !res.Prefix.IsValid() {
			continue
		}
		if a := res.Prefix.Addr(); a.Is4In6() {
			// ::ffff:10.0.0.0/104 reserves 10.0.0.0/8: groups hold no mapped addresses.
			res.Prefix = netip.PrefixFrom(a.Unmap(), max(res.Prefix.Bits()-96, 0))
		}
		res.Prefix = res.Prefix.Masked()
		s := span{res.Prefix.Addr(), LastAddr(res.Prefix)}
		if res.L2Only {
			r.l2 = append(r.l2, s)
		} else {
			r.all = append(r.all, s)
		}
		if res.Prefix.IsSingleIP() {
			r.hosts[res.Prefix.Addr()] = append(r.hosts[res.Prefix.Addr()], res)
		} else {
			r.nets = append(r.nets, res)
		}
	}
	r.all, r.l2 = mergeSpans(r.all), mergeSpans(r.l2)
	slices.SortStableFunc(r.nets, func(x, y Reservation) int { return y.Prefix.Bits() - x.Prefix.Bits() })
	a.reserved = r
	// A reservation that went away may free addresses below a hint.
	a.hints = map[hintKey]hint{}
}

// ReservedIn reports what holds addr when group g would hand it out, a Node's
// claim included.
func (a *Allocator) ReservedIn(g *Group, addr netip.Addr) (Reservation, bool) {
	if _, ok := spanAt(a.reserved.all, addr); ok {
		return a.reserved.holder(addr, false, true)
	}
	if _, ok := spanAt(a.reserved.l2, addr); ok && g.L2 {
		return a.reserved.holder(addr, true, true)
	}
	return Reservation{}, false
}

// Reserved reports what holds addr, an address some key holds: reserved for
// every group, or L2-only and in a group announced on layer 2 that may hand it
// out. A Node's claim is not a reservation of a held address (Claims).
func (a *Allocator) Reserved(addr netip.Addr) (Reservation, bool) {
	if _, ok := spanAt(a.reserved.all, addr); ok {
		if r, ok := a.reserved.holder(addr, false, false); ok {
			return r, true
		}
	}
	if _, ok := spanAt(a.reserved.l2, addr); ok && a.inL2Group(addr) {
		return a.reserved.holder(addr, true, false)
	}
	return Reservation{}, false
}

// inL2Group reports whether a group announced on layer 2 may hand addr out.
func (a *Allocator) inL2Group(addr netip.Addr) bool {
	for _, g := range a.groups {
		if g.L2 && g.Usable(addr) {
			return true
		}
	}
	return false
}

// holder finds the most specific reservation of addr; Nodes' claims only
// when claims is set.
func (r reservations) holder(addr netip.Addr, l2, claims bool) (Reservation, bool) {
	for _, res := range r.hosts[addr] {
		if res.L2Only == l2 && (claims || res.Node == "") {
			return res, true
		}
	}
	for _, res := range r.nets {
		if res.L2Only == l2 && (claims || res.Node == "") && res.Prefix.Contains(addr) {
			return res, true
		}
	}
	return Reservation{}, false
}

// reservedSpanAt returns the reserved span of g holding addr, to skip it whole.
func (a *Allocator) reservedSpanAt(g *Group, addr netip.Addr) (span, bool) {
	s, ok := spanAt(a.reserved.all, addr)
	if l2, inL2 := spanAt(a.reserved.l2, addr); g.L2 && inL2 && (!ok || s.last.Less(l2.last)) {
		return l2, true
	}
	return s, ok
}

// ReservedCount is the number of g's usable addresses that are reserved for g.
func (a *Allocator) ReservedCount(g *Group) *big.Int {
	spans := a.reserved.all
	if g.L2 {
		spans = mergeSpans(append(slices.Clone(spans), a.reserved.l2...))
	}
	total := new(big.Int)
	for _, s := range intersectSpans(spans, g.free) {
		total.Add(total, g.usableIn(s))
	}
	return total
}

// spanAt finds the span of sorted, merged spans holding addr.
func spanAt(spans []span, addr netip.Addr) (span, bool) {
	i, _ := slices.BinarySearchFunc(spans, addr, func(s span, a netip.Addr) int { return s.last.Compare(a) })
	if i < len(spans) && spans[i].first.Compare(addr) <= 0 {
		return spans[i], true
	}
	return span{}, false
}

// intersectSpans returns the parts of a (sorted, merged) inside b (sorted, merged).
func intersectSpans(a, b []span) []span {
	var out []span
	for i, j := 0, 0; i < len(a) && j < len(b); {
		first, last := maxAddr(a[i].first, b[j].first), minAddr(a[i].last, b[j].last)
		if !last.Less(first) {
			out = append(out, span{first, last})
		}
		if a[i].last.Less(b[j].last) {
			i++
		} else {
			j++
		}
	}
	return out
}

// subtractSpans returns the parts of a (sorted, merged) outside b (sorted, merged).
func subtractSpans(a, b []span) []span {
	var out []span
	for _, s := range a {
		for _, cut := range b {
			if cut.last.Less(s.first) || s.last.Less(cut.first) {
				continue
			}
			if s.first.Less(cut.first) {
				out = append(out, span{s.first, cut.first.Prev()})
			}
			if !cut.last.Less(s.last) {
				s = span{} // wholly cut
				break
			}
			s.first = cut.last.Next()
		}
		if s.first.IsValid() {
			out = append(out, s)
		}
	}
	return out
}

func maxAddr(x, y netip.Addr) netip.Addr {
	if x.Less(y) {
		return y
	}
	return x
}

func minAddr(x, y netip.Addr) netip.Addr {
	if x.Less(y) {
		return x
	}
	return y
}

// Conflicts returns the keys holding reserved addresses, with what holds each.
func (a *Allocator) Conflicts() map[string]map[netip.Addr]Reservation {
	out := map[string]map[netip.Addr]Reservation{}
	for addr := range a.owner {
		r, ok := a.Reserved(addr)
		if !ok {
			continue
		}
		for _, key := range a.Holders(addr) {
			if out[key] == nil {
				out[key] = map[netip.Addr]Reservation{}
			}
			out[key][addr] = r
		}
	}
	return out
}

// Claims returns the held addresses that Nodes claim, each with ClaimsOf.
func (a *Allocator) Claims() map[netip.Addr][]Reservation {
	out := map[netip.Addr][]Reservation{}
	for addr := range a.owner {
		if claims := a.ClaimsOf(addr); len(claims) > 0 {
			out[addr] = claims
		}
	}
	return out
}

// ClaimsOf returns the Nodes' claims of addr (Reservation.Node), one per Node,
// sorted by Node. An L2-only claim counts where a group announced on layer 2
// may hand the address out, as in Reserved.
func (a *Allocator) ClaimsOf(addr netip.Addr) []Reservation {
	var claims []Reservation
	for _, res := range a.reserved.hosts[addr] {
		if res.Node == "" || (res.L2Only && !a.inL2Group(addr)) ||
			slices.ContainsFunc(claims, func(c Reservation) bool { return c.Node == res.Node }) {
			continue
		}
		claims = append(claims, res)
	}
	slices.SortFunc(claims, func(x, y Reservation) int { return strings.Compare(x.Node, y.Node) })
	return claims
}
