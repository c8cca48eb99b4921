package dataplane

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"
)

// A connectionless flow (UDP, SCTP) to a VIP keeps its conntrack entry, and so
// its DNAT to one endpoint, for as long as packets keep coming: a client that
// sends from the same port every second never times out. When that endpoint
// goes away its packets would vanish for good, so the entries of a VIP port
// DNATed to an endpoint no longer among its targets are deleted (kube-proxy
// does the same for its Services). TCP needs none of this: a dead endpoint's
// connections reset or time out and the next one is DNATed afresh.

// StaleFlow names the conntrack entries to delete: those of a connectionless
// VIP port whose replies come from an endpoint that no longer serves it.
type StaleFlow struct {
	VIP      netip.Addr
	Protocol Protocol
	Port     uint16
	Endpoint netip.Addr
}

// StaleFlows returns the flows of before's connectionless ports that after no
// longer sends to: an endpoint gone from a port, or the port, VIP or Service
// gone. A nil before or after is a Service absent.
func StaleFlows(before, after *Service) []StaleFlow {
	if before == nil {
		return nil
	}
	var stale []StaleFlow
	var scratch []target
	for _, fam := range []Family{IPv4, IPv6} {
		for _, p := range before.Ports {
			if proto(p.Protocol) == TCP {
				continue
			}
			was := endpointAddrs(appendPortTargets(scratch[:0], fam, before, p))
			var is []netip.Addr
			if after != nil {
				is = endpointAddrs(appendPortTargets(scratch[:0], fam, after, p))
			}
			for _, vip := range before.VIPs {
				vip = vip.Unmap()
				if !fam.matches(vip) {
					continue
				}
				kept := after != nil && slices.ContainsFunc(after.VIPs, func(v netip.Addr) bool { return v.Unmap() == vip })
				for _, ep := range was {
					if !kept || !slices.Contains(is, ep) {
						stale = append(stale, StaleFlow{VIP: vip, Protocol: proto(p.Protocol), Port: p.Port, Endpoint: ep})
					}
				}
			}
		}
	}
	return stale
}

func endpointAddrs(ts []target) []netip.Addr {
	addrs := make([]netip.Addr, 0, len(ts))
	for _, t := range ts {
		if !slices.Contains(addrs, t.addr) {
			addrs = append(addrs, t.addr)
		}
	}
	return addrs
}

// ForgetFlows deletes the conntrack entries of flows in this network
// namespace, one pass over the table per family.
func ForgetFlows(flows []StaleFlow) error {
	var errs []error
	for fam, family := range map[Family]netlink.InetFamily{IPv4: unix.AF_INET, IPv6: unix.AF_INET6} {
		var filters []netlink.CustomConntrackFilter
		for _, f := range flows {
			if !fam.matches(f.VIP) {
				continue
			}
			filter, err := flowFilter(f)
			if err != nil {
				errs = append(errs, err)
				continue
			}
			filters = append(filters, filter)
		}
		if len(filters) == 0 {
			continue
		}
		if _, err := netlink.ConntrackDeleteFilters(netlink.ConntrackTable, family, filters...); err != nil {
			errs = append(errs, fmt.Errorf("delete %s conntrack entries of %d stale flows: %w", fam, len(filters), err))
		}
	}
	return errors.Join(errs...)
}

func flowFilter(f StaleFlow) (*netlink.ConntrackFilter, error) {
	protocols := map[Protocol]uint8{UDP: unix.IPPROTO_UDP, SCTP: unix.IPPROTO_SCTP}
	filter := &netlink.ConntrackFilter{}
	if err := errors.Join(
		filter.AddProtocol(protocols[f.Protocol]),
		filter.AddIP(netlink.ConntrackOrigDstIP, f.VIP.AsSlice()),
		filter.AddPort(netlink.ConntrackOrigDstPort, f.Port),
		filter.AddIP(netlink.ConntrackReplySrcIP, f.Endpoint.AsSlice()),
	); err != nil {
		return nil, fmt.Errorf("conntrack filter for %s %s:%d via %s: %w", f.Protocol, f.VIP, f.Port, f.Endpoint, err)
	}
	return filter, nil
}
