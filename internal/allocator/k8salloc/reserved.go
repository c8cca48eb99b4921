package k8salloc

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

// Reservations reads what the cluster reserves, the addresses no Service may
// be given: every Node's addresses (status.addresses and the interface
// addresses its agent publishes), every Node's spec.podCIDRs, the Service
// CIDRs (ServiceCIDR objects, plus configured for clusters without them), and
// for L2 groups the network and broadcast address of every IPv4 subnet a
// node has an interface on (the subnets an L2 VIP is announced on). Each
// Reservation's Kind is the reason of the Service condition
// vip.paas.org/AddressConflict. What does not parse is skipped: objects are
// hostile input, and a garbage entry must not reserve anything.
func Reservations(nodes []corev1.Node, serviceCIDRs []networkingv1.ServiceCIDR, configured []netip.Prefix) []allocator.Reservation {
	var out []allocator.Reservation
	add := func(p netip.Prefix, kind, holder string, l2 bool) {
		out = append(out, allocator.Reservation{Prefix: p, Kind: kind, Holder: holder, L2Only: l2})
	}
	for _, n := range nodes {
		for _, a := range n.Status.Addresses {
			if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
				continue
			}
			if addr, err := netip.ParseAddr(a.Address); err == nil {
				addr = addr.Unmap().WithZone("")
				add(netip.PrefixFrom(addr, addr.BitLen()), paasv1.ReasonReservedByNode, "the address of Node "+n.Name, false)
			}
		}
	}
	// Interface addresses after status addresses: a holder is named by the
	// first reservation of an address, and "the address of Node" is the plainer.
	subnets := map[netip.Prefix]bool{}
	for _, n := range nodes {
		for _, ifc := range paasv1.ParseNodeInterfaces(n.Annotations[paasv1.NodeInterfacesAnnotation]) {
			for _, p := range ifc.Addrs {
				if !p.IsValid() {
					continue
				}
				addr := p.Addr().Unmap().WithZone("")
				add(netip.PrefixFrom(addr, addr.BitLen()), paasv1.ReasonReservedByNode, fmt.Sprintf("the address of Node %s on %s", n.Name, ifc.Name), false)
				subnet := netip.PrefixFrom(addr, p.Bits()).Masked()
				// /31 and /32 have no network or broadcast address (RFC 3021).
				if !addr.Is4() || p.Bits() > 30 || subnets[subnet] {
					continue
				}
				subnets[subnet] = true
				where := fmt.Sprintf("subnet %s (Node %s, %s)", subnet, n.Name, ifc.Name)
				add(netip.PrefixFrom(subnet.Addr(), 32), paasv1.ReasonReservedBySubnet, "the network address of "+where, true)
				add(netip.PrefixFrom(allocator.LastAddr(subnet), 32), paasv1.ReasonReservedBySubnet, "the broadcast address of "+where, true)
			}
		}
	}
	for _, n := range nodes {
		for _, s := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				p = p.Masked()
				add(p, paasv1.ReasonReservedByPodCIDR, fmt.Sprintf("in the pod CIDR %s of Node %s", p, n.Name), false)
			}
		}
	}
	for _, sc := range serviceCIDRs {
		for _, s := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				p = p.Masked()
				add(p, paasv1.ReasonReservedByServiceCIDR, fmt.Sprintf("in the Service CIDR %s (ServiceCIDR %s)", p, sc.Name), false)
			}
		}
	}
	for _, p := range configured {
		p = p.Masked()
		add(p, paasv1.ReasonReservedByServiceCIDR, fmt.Sprintf("in the Service CIDR %s (operator flag --service-cidrs)", p), false)
	}
	return out
}
