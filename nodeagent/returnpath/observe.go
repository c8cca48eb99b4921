package returnpath

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"

	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
)

// Interfaces reads the node's interfaces that are up, with their global addresses, and what
// the main table says of them: which carries the default route, which routers it reaches.
// It only reads.
func Interfaces() ([]returnplan.Interface, error) {
	routes, err := MainRoutes()
	if err != nil {
		return nil, err
	}
	return InterfacesRouted(routes)
}

// InterfacesRouted is Interfaces with the main table's routes read already (MainRoutes): a
// caller that needs them for more reads the table once.
func InterfacesRouted(routes []Route) ([]returnplan.Interface, error) {
	links, err := netlink.LinkList()
	if err != nil {
		return nil, fmt.Errorf("list links: %w", err)
	}
	byIndex := map[int]*returnplan.Interface{}
	var order []int
	for _, l := range links {
		a := l.Attrs()
		if a.Flags&(1<<0) == 0 || a.Flags&(1<<3) != 0 { // net.FlagUp, net.FlagLoopback
			continue
		}
		byIndex[a.Index] = &returnplan.Interface{Name: a.Name, Index: a.Index,
			Gateways: map[allocator.Family]netip.Addr{}, Default: map[allocator.Family]bool{}}
		order = append(order, a.Index)
	}
	for _, f := range families {
		if err := readAddrs(byIndex, f.fam, f.nlFam); err != nil {
			return nil, err
		}
		addRoutes(byIndex, f.fam, routes)
	}
	var out []returnplan.Interface
	for _, i := range order {
		out = append(out, *byIndex[i])
	}
	return out, nil
}

// readAddrs adds the global addresses of one family to byIndex.
func readAddrs(byIndex map[int]*returnplan.Interface, fam allocator.Family, nlFam int) error {
	addrs, err := netlink.AddrList(nil, nlFam)
	if err != nil {
		return fmt.Errorf("list %s addresses: %w", fam, err)
	}
	for _, a := range addrs {
		ifi := byIndex[a.LinkIndex]
		ip, ok := netip.AddrFromSlice(a.IP)
		if ifi == nil || !ok || !ip.Unmap().IsGlobalUnicast() {
			continue
		}
		ones, _ := a.Mask.Size()
		ifi.Prefixes = append(ifi.Prefixes, netip.PrefixFrom(ip.Unmap(), ones))
	}
	return nil
}

// addRoutes adds to byIndex what the main table's routes of one family say of each interface.
// The default route the kernel uses is the one of lowest metric; any default route's gateway
// on an interface is its router, else any other route's.
func addRoutes(byIndex map[int]*returnplan.Interface, fam allocator.Family, routes []Route) {
	best, bestLink := -1, 0
	defaultGW, anyGW := map[int]netip.Addr{}, map[int]netip.Addr{}
	for _, r := range routes {
		if r.Family != fam {
			continue
		}
		for _, h := range r.Hops {
			if !h.Gateway.IsValid() || byIndex[h.Link] == nil {
				continue
			}
			if r.Default && !defaultGW[h.Link].IsValid() {
				defaultGW[h.Link] = h.Gateway
			}
			if !anyGW[h.Link].IsValid() {
				anyGW[h.Link] = h.Gateway
			}
		}
		if r.Default && r.Link != 0 && (best < 0 || r.Metric < best) {
			best, bestLink = r.Metric, r.Link
		}
	}
	for i, ifi := range byIndex {
		if gw := defaultGW[i]; gw.IsValid() {
			ifi.Gateways[fam] = gw
		} else if gw := anyGW[i]; gw.IsValid() {
			ifi.Gateways[fam] = gw
		}
	}
	if ifi := byIndex[bestLink]; ifi != nil {
		ifi.Default[fam] = true
	}
}
