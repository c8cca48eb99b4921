package dataplane

import (
	"net/netip"
	"slices"
	"strings"

	"github.com/paas-org/vip-allocator-operator/internal/steering"
)

// This file holds what both planes derive from the Services alone, before either spells a
// rule or an element: which Services a family serves, the endpoints each Service port spreads
// over, and the source ranges it admits. Both planes decide with these functions and nothing
// else, so they serve exactly the same endpoints (kube-proxy keeps CategorizeEndpoints outside
// its proxiers for the same reason). Nothing here knows iptables or nftables.

// matches reports whether a is an address of family f.
func (f Family) matches(a netip.Addr) bool {
	return a.IsValid() && a.Is4() == (f == IPv4)
}

// proto defaults an empty protocol to TCP, as the API server does.
func proto(p Protocol) Protocol {
	if p == "" {
		return TCP
	}
	return p
}

// reachable reports whether a Service is served at all in family fam: it is not Closed, it
// has a VIP of the family, and no source ranges or one of the family. An allow-list that
// names nobody of this family allows nobody, and one that does not parse allows nobody at
// all, so such a Service's VIPs are only rejected: both planes write the rejects of every
// VIP, reachable or not.
func reachable(fam Family, s *Service) bool {
	return !s.Closed && slices.ContainsFunc(s.VIPs, func(v netip.Addr) bool { return fam.matches(v.Unmap()) }) &&
		(len(s.SourceRanges) == 0 ||
			slices.ContainsFunc(s.SourceRanges, func(p netip.Prefix) bool { return fam.matches(p.Addr()) }))
}

// target is one DNAT destination of a Service port.
type target struct {
	addr netip.Addr
	port uint16
}

// appendPortTargets appends to dst the endpoints a Service port spreads over in family fam:
// every ready endpoint with a port of the same name and protocol (only this node's for policy
// Local), sorted and without duplicates, so that informer order does not cause rewrites.
// A port of a protocol the kernel cannot DNAT by port has none. A port without targets is
// not DNATed at all, so its VIP rejects it. Callers pass scratch space as dst: at 10,000
// Services a Sync asks for ~20,000 of these.
func appendPortTargets(dst []target, fam Family, s *Service, p Port) []target {
	return appendTargets(dst, fam, s, p, s.Local)
}

// appendLocalPortTargets is appendPortTargets with this node's endpoints only, whatever the
// policy: what a steered Service port's serving node DNATs to.
func appendLocalPortTargets(dst []target, fam Family, s *Service, p Port) []target {
	return appendTargets(dst, fam, s, p, true)
}

// portEndpointPort is the port of ep that serves Service port p (0: none).
func portEndpointPort(ep *Endpoint, p Port) uint16 {
	for _, epp := range ep.Ports {
		if epp.Name == p.Name && proto(epp.Protocol) == proto(p.Protocol) && epp.Port != 0 {
			return epp.Port
		}
	}
	return 0
}

// portNodes weighs the nodes that serve Service port p in family fam by their ready endpoints
// of it (an address counted once): the steering table's input. Endpoints whose node is not
// known are left out: no node could be steered to them. Under policy Local it is the same,
// since each node serves with its own endpoints anyway.
func portNodes(fam Family, s *Service, p Port) []steering.Node {
	switch proto(p.Protocol) {
	case TCP, UDP, SCTP:
	default:
		return nil
	}
	type id struct {
		node string
		addr netip.Addr
	}
	seen := map[id]bool{}
	var out []steering.Node
	for i := range s.Endpoints {
		ep := &s.Endpoints[i]
		addr := ep.Addr.Unmap()
		if ep.Node == "" || !fam.matches(addr) || portEndpointPort(ep, p) == 0 || seen[id{ep.Node, addr}] {
			continue
		}
		seen[id{ep.Node, addr}] = true
		out = append(out, steering.Node{Name: ep.Node, Weight: 1}) // steering.Build adds a node's up
	}
	return out
}

func appendTargets(dst []target, fam Family, s *Service, p Port, localOnly bool) []target {
	switch proto(p.Protocol) {
	case TCP, UDP, SCTP:
	default:
		return dst
	}
	n, out := len(dst), dst
	for _, ep := range s.Endpoints {
		addr := ep.Addr.Unmap()
		if !fam.matches(addr) || (localOnly && !ep.Local) {
			continue
		}
		for _, epp := range ep.Ports {
			if epp.Name == p.Name && proto(epp.Protocol) == proto(p.Protocol) && epp.Port != 0 {
				out = append(out, target{addr: addr, port: epp.Port})
				break
			}
		}
	}
	mine := out[n:]
	slices.SortFunc(mine, func(a, b target) int {
		if c := a.addr.Compare(b.addr); c != 0 {
			return c
		}
		return int(a.port) - int(b.port)
	})
	return out[:n+len(slices.Compact(mine))]
}

// disjointRanges are the source ranges of family fam, masked, without those inside another:
// an nftables interval set refuses overlapping elements. (Prefixes nest or are disjoint.)
func disjointRanges(fam Family, in []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range in {
		if p.IsValid() && fam.matches(p.Addr()) {
			out = append(out, p.Masked())
		}
	}
	// Shorter prefixes first, so a prefix is compared with every wider one kept before it.
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Bits() - b.Bits(); c != 0 {
			return c
		}
		return a.Addr().Compare(b.Addr())
	})
	kept := out[:0]
	for _, p := range out {
		if !slices.ContainsFunc(kept, func(k netip.Prefix) bool { return k.Contains(p.Addr()) }) {
			kept = append(kept, p)
		}
	}
	return kept
}

// sortedServices orders Services by namespace/name without touching the caller's slice, so
// what a plane writes, and therefore its change detection, does not depend on informer order;
// a second Service of the same namespace/name is then skipped by both planes alike.
func sortedServices(in []Service) []*Service {
	out := make([]*Service, len(in))
	for i := range in {
		out[i] = &in[i]
	}
	slices.SortStableFunc(out, func(a, b *Service) int {
		if c := strings.Compare(a.Namespace, b.Namespace); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	return out
}
