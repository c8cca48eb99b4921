package nodes

import (
	"fmt"
	"net"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
)

// defaultGateways maps each interface index to the next hops of the default
// routes (IPv4 and IPv6, main table) leaving through it, multipath routes'
// hops included. The operator keeps them out of every IPGroup's new
// allocations: a VIP given the router's address would make the nodes answer
// for the LAN's router.
func defaultGateways() (map[int][]netip.Addr, error) {
	routes, err := netlink.RouteList(nil, netlink.FAMILY_ALL)
	if err != nil {
		return nil, fmt.Errorf("list routes: %w", err)
	}
	out := map[int][]netip.Addr{}
	add := func(link int, gw net.IP) {
		addr, ok := netip.AddrFromSlice(gw)
		if !ok || link == 0 || !addr.Unmap().IsValid() || addr.Unmap().IsUnspecified() {
			return
		}
		if addr = addr.Unmap(); !slices.Contains(out[link], addr) {
			out[link] = append(out[link], addr)
		}
	}
	for _, r := range routes {
		if !isDefault(r.Dst) {
			continue
		}
		add(r.LinkIndex, r.Gw)
		for _, hop := range r.MultiPath {
			add(hop.LinkIndex, hop.Gw)
		}
	}
	for link := range out {
		slices.SortFunc(out[link], netip.Addr.Compare)
		// The NodeView holds at most this many per interface (its CRD's
		// bound): more would make the view unwritable.
		out[link] = out[link][:min(len(out[link]), maxGateways)]
	}
	return out, nil
}

// maxGateways is NodeViewInterface.Gateways' MaxItems.
const maxGateways = 16

// isDefault reports a default route's destination (0.0.0.0/0, ::/0, or none).
func isDefault(dst *net.IPNet) bool {
	if dst == nil {
		return true
	}
	ones, _ := dst.Mask.Size()
	return ones == 0
}
