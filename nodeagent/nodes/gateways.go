package nodes

import (
	"net/netip"
	"slices"

	"github.com/paas-org/vip-allocator-operator/nodeagent/returnpath"
)

// defaultGateways maps each interface index to the next hops of the default
// routes among routes (the main table's, both families) leaving through it,
// multipath routes' hops included. The operator keeps them out of every
// IPGroup's new allocations: a VIP given the router's address would make the
// nodes answer for the LAN's router.
func defaultGateways(routes []returnpath.Route) map[int][]netip.Addr {
	out := map[int][]netip.Addr{}
	for _, r := range routes {
		if !r.Default {
			continue
		}
		for _, h := range r.Hops {
			if h.Link == 0 || !h.Gateway.IsValid() || h.Gateway.IsUnspecified() || slices.Contains(out[h.Link], h.Gateway) {
				continue
			}
			out[h.Link] = append(out[h.Link], h.Gateway)
		}
	}
	for link := range out {
		slices.SortFunc(out[link], netip.Addr.Compare)
		// The NodeView holds at most this many per interface (its CRD's
		// bound): more would make the view unwritable.
		out[link] = out[link][:min(len(out[link]), maxGateways)]
	}
	return out
}

// maxGateways is NodeViewInterface.Gateways' MaxItems.
const maxGateways = 16
