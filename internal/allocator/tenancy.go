package allocator

import (
	"net/netip"
	"strings"
)

// Tenancy across overlapping groups: an address that several groups may hand
// out goes only to a Service that every one of them admits by its selectors
// (namespaceSelector, serviceSelector). A group's selectors fence all its
// parts; a second group laid over it cannot open a door into it. Naming
// groups (vip.paas.org/ipgroup) chooses where an address comes from but does
// not lift a fence: a group the Service does not name still guards its part.
//
// The rule applies when an address is handed out. An address a key already
// holds is not taken away by it: a group created later over live Services
// does not change their addresses (relocation follows the groups a Service is
// admitted by, relocate.go).

// selectorsAdmit reports whether g's selectors let req's Service in.
func selectorsAdmit(g *Group, req Request) bool {
	return g.Admits == nil || g.Admits(req.NamespaceLabels, req.ServiceLabels)
}

// fencedBy returns a group other than g that may hand out addr and whose
// selectors do not admit req; g may be nil.
func (a *Allocator) fencedBy(g *Group, addr netip.Addr, req Request) (*Group, bool) {
	for _, other := range a.groups {
		if other != g && other.Contains(addr) && !other.IsExcluded(addr) && !selectorsAdmit(other, req) {
			return other, true
		}
	}
	return nil, false
}

// runEnd is the last address of the run, starting at addr, that g does not
// exclude: up to its next excluded range or the end of addr's part.
func (g *Group) runEnd(addr netip.Addr) netip.Addr {
	if s, ok := spanAt(g.free, addr); ok {
		return s.last
	}
	return addr
}

// holderName names holder, a key, in a message to key: as namespace/name when
// both are of one namespace, else only as a Service (or a legacy VirtualIP,
// "VirtualIP namespace/name") of another namespace: a refusal must not tell
// one tenant what another runs, nor where.
func holderName(key, holder string) string {
	kind, ref := "Service", holder
	if k, rest, ok := strings.Cut(holder, " "); ok {
		kind, ref = k, rest
	}
	ns, _, isRef := strings.Cut(ref, "/")
	if !isRef {
		return holder // no tenant's name ("unowned <address>")
	}
	if mine, _, _ := strings.Cut(key, "/"); mine == ns {
		return holder
	}
	return "a " + kind + " in another namespace"
}
