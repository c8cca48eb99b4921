package returnpath

import (
	"fmt"
	"net/netip"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
)

// Interfaces reads the node's interfaces that are up, with their global addresses, and what
// the main table says of them: which carries the default route, which routers it reaches.
// It only reads.
func Interfaces() ([]returnplan.Interface, error) {
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
		if err := readFamily(byIndex, f.fam, f.nlFam); err != nil {
			return nil, err
		}
	}
	var out []returnplan.Interface
	for _, i := range order {
		out = append(out, *byIndex[i])
	}
	return out, nil
}

// readFamily adds the addresses and main-table routes of one family to byIndex.
func readFamily(byIndex map[int]*returnplan.Interface, fam allocator.Family, nlFam int) error {
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
	routes, err := netlink.RouteListFiltered(nlFam, &netlink.Route{Table: unix.RT_TABLE_MAIN}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list %s routes of the main table: %w", fam, err)
	}
	// The default route the kernel uses is the one of lowest metric; any default route's
	// gateway on an interface is its router, else any other route's.
	best, bestLink := -1, 0
	defaultGW, anyGW := map[int]netip.Addr{}, map[int]netip.Addr{}
	for _, r := range routes {
		isDefault := r.Dst == nil || func() bool { o, _ := r.Dst.Mask.Size(); return o == 0 }()
		hops := []*netlink.NexthopInfo{{LinkIndex: r.LinkIndex, Gw: r.Gw}}
		hops = append(hops, r.MultiPath...)
		for _, h := range hops {
			gw, ok := netip.AddrFromSlice(h.Gw)
			if !ok || byIndex[h.LinkIndex] == nil {
				continue
			}
			if isDefault && !defaultGW[h.LinkIndex].IsValid() {
				defaultGW[h.LinkIndex] = gw.Unmap()
			}
			if !anyGW[h.LinkIndex].IsValid() {
				anyGW[h.LinkIndex] = gw.Unmap()
			}
		}
		if isDefault && r.LinkIndex != 0 && (best < 0 || r.Priority < best) {
			best, bestLink = r.Priority, r.LinkIndex
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
	return nil
}
