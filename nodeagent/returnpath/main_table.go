package returnpath

import (
	"fmt"
	"net"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

// Route is a route of the node's main table as the agent goes by it: the return paths take
// each interface's router from it, the published NodeView its default gateways.
type Route struct {
	Family allocator.Family
	// Default: the destination is 0.0.0.0/0 or ::/0.
	Default bool
	// Metric orders default routes: the kernel uses the lowest.
	Metric int
	// Link is the interface the route leaves by; 0 for a multipath route, whose Hops say it.
	Link int
	// Hops are the route's own next hop first (neither interface nor gateway on a multipath
	// route), then a multipath route's each, in the kernel's order.
	Hops []Hop
}

// Hop is one next hop of a route.
type Hop struct {
	Link int
	// Gateway is the router the hop goes to; invalid for a route straight onto the link.
	Gateway netip.Addr
}

// MainRoutes reads the main table's routes, IPv4 then IPv6, each family in the kernel's
// order. It only reads.
func MainRoutes() ([]Route, error) {
	var out []Route
	for _, f := range families {
		routes, err := netlink.RouteListFiltered(f.nlFam, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return nil, fmt.Errorf("list %s routes of the main table: %w", f.fam, err)
		}
		for _, r := range routes {
			route := Route{Family: f.fam, Default: isDefault(r.Dst), Metric: r.Priority, Link: r.LinkIndex,
				Hops: []Hop{hop(r.LinkIndex, r.Gw)}}
			for _, h := range r.MultiPath {
				route.Hops = append(route.Hops, hop(h.LinkIndex, h.Gw))
			}
			out = append(out, route)
		}
	}
	return out, nil
}

// isDefault reports a default route's destination (0.0.0.0/0, ::/0, or none).
func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0
}

func hop(link int, gw net.IP) Hop {
	addr, _ := netip.AddrFromSlice(gw)
	return Hop{Link: link, Gateway: addr.Unmap()}
}
