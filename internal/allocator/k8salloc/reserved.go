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
// be given: every Node's status.addresses (the kubelet writes them), every
// Node's spec.podCIDRs, the Service CIDRs (ServiceCIDR objects, plus
// configured for clusters without them), and each Node's claims (NodeClaims).
// Each
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
	for i := range nodes {
		out = append(out, NodeClaims(&nodes[i])...)
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

// NodeClaims are the addresses n's agent says n has (the interfaces
// annotation): each interface address, each default gateway (in every group,
// whatever its mode: a router's address is no VIP on a LAN nor behind a BGP
// peer) and, for L2 groups, the network and broadcast address of each IPv4
// subnet it is on (the subnets an L2 VIP is announced on). An agent writes them, so they are claims (Reservation.Node),
// never reservations of an address a Service holds: a compromised node listing
// other Services' VIPs must not take them from every node. A claim of a held
// address excludes only n from carrying it (election.Claims decides the same
// from the same annotation). A free address n claims is kept out of new
// allocations all the same: n answers for it on its link, and a VIP given it
// would be black-holed or fought over there; the cost of a false claim is
// that a compromised node can shrink the free part of a pool, which its place
// on the link lets it do anyway by answering ARP for those addresses.
func NodeClaims(n *corev1.Node) []allocator.Reservation {
	var out []allocator.Reservation
	add := func(p netip.Prefix, kind, holder string, l2 bool) {
		out = append(out, allocator.Reservation{Prefix: p, Kind: kind, Holder: holder, L2Only: l2, Node: n.Name})
	}
	subnets := map[netip.Prefix]bool{}
	for _, ifc := range paasv1.ParseNodeInterfaces(n.Annotations[paasv1.NodeInterfacesAnnotation]) {
		for _, gw := range ifc.Gateways {
			if gw = gw.Unmap().WithZone(""); gw.IsValid() {
				add(netip.PrefixFrom(gw, gw.BitLen()), paasv1.ReasonReservedByGateway, fmt.Sprintf("the default gateway of Node %s on %s", n.Name, ifc.Name), false)
			}
		}
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
	return out
}

// PeerReservations are the addresses of the BGPPeers: routers, which no
// Service may be given in any group (a /32 advertised to a router for its own
// address, or a VIP answering ARP for it, cuts the router off). Admins write
// BGPPeers, so unlike a Node's claims they reserve a held address too (the
// Service's AddressConflict).
func PeerReservations(peers []paasv1.BGPPeer) []allocator.Reservation {
	var out []allocator.Reservation
	for _, p := range peers {
		if addr, err := netip.ParseAddr(p.Spec.PeerAddress); err == nil {
			addr = addr.Unmap().WithZone("")
			out = append(out, allocator.Reservation{Prefix: netip.PrefixFrom(addr, addr.BitLen()), Kind: paasv1.ReasonReservedByBGPPeer,
				Holder: fmt.Sprintf("the address of BGPPeer %s", p.Name)})
		}
	}
	return out
}
