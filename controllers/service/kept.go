package service

import (
	"net/netip"
	"slices"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

// groupProtection is what the Service reconciler needs of a group to know
// whether it keeps an address a Service holds from it.
type groupProtection struct {
	group    *allocator.Group // nil when its spec is unusable
	deleting bool
	released bool
}

// keptAddresses are the addresses of the Service's ledger objects that stay
// with it although no group that admits it allows them: the group the ledger
// records them in still exists and has not released them, and would admit
// the Service (a Service that names another group, or that the group's
// selectors no longer match, asked to move by its own change).
func keptAddresses(ips []paasv1.IP, groups map[string]groupProtection, req allocator.Request) []netip.Addr {
	var out []netip.Addr
	for i := range ips {
		addr, ok := ips[i].Addr()
		if !ok {
			continue
		}
		p, exists := groups[ips[i].Labels[paasv1.IPGroupLabel]]
		switch {
		case !exists || p.released:
			continue
		case p.group != nil && !allocator.Admits(p.group, req):
			continue
		case p.group != nil && !p.deleting && p.group.Usable(addr):
			continue // allowed: nothing to keep
		}
		if !slices.Contains(out, addr) {
			out = append(out, addr)
		}
	}
	return out
}
