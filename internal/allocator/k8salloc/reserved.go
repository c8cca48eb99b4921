package k8salloc

import (
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// Reservations reads what the cluster reserves, the addresses no Service may
// be given: every Node's status.addresses and each Node's claims
// (NodeClaims), every Node's spec.podCIDRs, the Service CIDRs (ServiceCIDR
// objects, plus configured for clusters without them). routers are the
// gateways (announce.gateway) of the groups announced on layer 2, which
// confirm a subnet a node's agent says the node is on (NodeClaims). Each
// Reservation's Kind is the reason of the Service condition
// vip.paas.org/AddressConflict. What does not parse is skipped: objects are
// hostile input, and a garbage entry must not reserve anything.
func Reservations(nodes []corev1.Node, serviceCIDRs []networkingv1.ServiceCIDR, configured []netip.Prefix, routers []netip.Addr) []allocator.Reservation {
	var out []allocator.Reservation
	add := func(p netip.Prefix, kind, holder string) {
		out = append(out, allocator.Reservation{Prefix: p, Kind: kind, Holder: holder})
	}
	// Status addresses before interface addresses: a holder is named by the
	// first reservation of an address, and "the address of Node" is the plainer.
	for i := range nodes {
		out = append(out, NodeAddresses(&nodes[i])...)
	}
	for i := range nodes {
		out = append(out, NodeClaims(&nodes[i], routers)...)
	}
	for _, n := range nodes {
		for _, s := range n.Spec.PodCIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				p = p.Masked()
				add(p, paasv1.ReasonReservedByPodCIDR, fmt.Sprintf("in the pod CIDR %s of Node %s", p, n.Name))
			}
		}
	}
	for _, sc := range serviceCIDRs {
		for _, s := range sc.Spec.CIDRs {
			if p, err := netip.ParsePrefix(s); err == nil {
				p = p.Masked()
				add(p, paasv1.ReasonReservedByServiceCIDR, fmt.Sprintf("in the Service CIDR %s (ServiceCIDR %s)", p, sc.Name))
			}
		}
	}
	for _, p := range configured {
		p = p.Masked()
		add(p, paasv1.ReasonReservedByServiceCIDR, fmt.Sprintf("in the Service CIDR %s (operator flag --service-cidrs)", p))
	}
	return out
}

// NodeAddresses are n's InternalIP and ExternalIP addresses. The kubelet
// writes them, but a node's kubelet may write its own Node: they are n's
// claims (Reservation.Node) in every group, like what its agent publishes. A
// free one is never handed out (the node answers for it); one a Service
// already holds stays the Service's, the other nodes go on carrying it, and
// the conflict is n's alone (the ledger object names n, n gets the Event,
// and the election never picks n for it).
func NodeAddresses(n *corev1.Node) []allocator.Reservation {
	var out []allocator.Reservation
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP && a.Type != corev1.NodeExternalIP {
			continue
		}
		if addr, err := netip.ParseAddr(a.Address); err == nil {
			addr = addr.Unmap().WithZone("")
			out = append(out, allocator.Reservation{Prefix: netip.PrefixFrom(addr, addr.BitLen()), Kind: paasv1.ReasonReservedByNode,
				Holder: "the address of Node " + n.Name, Node: n.Name})
		}
	}
	return out
}

// MaxClaimsPerNode bounds the addresses one node's agent may keep out of
// new allocations. An honest node claims a handful (an address, a gateway and
// a subnet's two edges per interface on a pool's LAN); without a bound an
// annotation of a few kilobytes would drain a /24.
const MaxClaimsPerNode = 16

// NodeClaims are the addresses n's agent says n has (the interfaces
// annotation), in groups announced on layer 2 only (Reservation.L2Only: BGP
// and unannounced groups never meet n's link): each interface address, each
// default gateway and the network and broadcast address of each IPv4 subnet
// it is on. Only addresses on a subnet n is really on count, one
// election.Interface.Confirmed by routers or by n's status.addresses (the
// rule that lets n announce a VIP there), and at most MaxClaimsPerNode of
// them. An agent writes them, so they are claims (Reservation.Node), never
// reservations of an address a Service holds: a compromised node listing
// other Services' VIPs must not take them from every node. A claim of a held
// address excludes only n from carrying it (election.Claims decides the same
// from the same annotation). A free address n claims is kept out of new
// allocations all the same: n answers for it on its link, and a VIP given it
// would be black-holed or fought over there; the cost of a false claim is
// that a compromised node can shrink the free part of its own LAN's pool by
// at most MaxClaimsPerNode, which its place on the link lets it do anyway by
// answering ARP for those addresses.
func NodeClaims(n *corev1.Node, routers []netip.Addr) []allocator.Reservation {
	var out []allocator.Reservation
	en := election.NodeOf(n)
	add := func(addr netip.Addr, kind, holder string) {
		if len(out) < MaxClaimsPerNode && en.OnConfirmedSubnet(addr, routers) {
			out = append(out, allocator.Reservation{Prefix: netip.PrefixFrom(addr, addr.BitLen()), Kind: kind, Holder: holder, L2Only: true, Node: n.Name})
		}
	}
	subnets := map[netip.Prefix]bool{}
	for _, ifc := range paasv1.ParseNodeInterfaces(n.Annotations[paasv1.NodeInterfacesAnnotation]) {
		for _, gw := range ifc.Gateways {
			if gw = gw.Unmap().WithZone(""); gw.IsValid() {
				add(gw, paasv1.ReasonReservedByGateway, fmt.Sprintf("the default gateway of Node %s on %s", n.Name, ifc.Name))
			}
		}
		for _, p := range ifc.Addrs {
			if !p.IsValid() {
				continue
			}
			addr := p.Addr().Unmap().WithZone("")
			add(addr, paasv1.ReasonReservedByNode, fmt.Sprintf("the address of Node %s on %s", n.Name, ifc.Name))
			subnet := netip.PrefixFrom(addr, p.Bits()).Masked()
			// /31 and /32 have no network or broadcast address (RFC 3021).
			if !addr.Is4() || p.Bits() > 30 || subnets[subnet] {
				continue
			}
			subnets[subnet] = true
			where := fmt.Sprintf("subnet %s (Node %s, %s)", subnet, n.Name, ifc.Name)
			add(subnet.Addr(), paasv1.ReasonReservedBySubnet, "the network address of "+where)
			add(allocator.LastAddr(subnet), paasv1.ReasonReservedBySubnet, "the broadcast address of "+where)
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
