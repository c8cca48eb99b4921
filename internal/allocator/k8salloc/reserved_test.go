package k8salloc

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

func TestReservations(t *testing.T) {
	node := func(name string, addrs []corev1.NodeAddress, podCIDRs []string, interfaces string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}}
		n.Status.Addresses, n.Spec.PodCIDRs = addrs, podCIDRs
		if interfaces != "" {
			n.Annotations = map[string]string{paasv1.NodeInterfacesAnnotation: interfaces}
		}
		return n
	}
	nodes := []corev1.Node{
		node("node1", []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "192.0.2.251"},
			{Type: corev1.NodeExternalIP, Address: "2001:db8::251"},
			{Type: corev1.NodeHostName, Address: "192.0.2.99"}, // a hostname slot: not an address
			{Type: corev1.NodeInternalIP, Address: "not-an-ip"},
		}, []string{"10.244.1.0/24", "fd00:10:244:1::/64", "garbage"},
			`[{"name":"eth0","addrs":["192.0.2.251/24"],"gateways":["192.0.2.1","fe80::1"]},{"name":"p2p","addrs":["203.0.113.1/31"]},{"name":"eth1","addrs":["198.51.100.7/24"],"gateways":["198.51.100.1"]}]`),
		node("node2", []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.252"}}, nil,
			`[{"name":"eth0","addrs":["192.0.2.252/24"]}]`), // the same subnet: node1, first, is named
		node("node3", nil, nil, `{not json`),
	}
	cidrs := []networkingv1.ServiceCIDR{{ObjectMeta: metav1.ObjectMeta{Name: "kubernetes"}, Spec: networkingv1.ServiceCIDRSpec{CIDRs: []string{"10.96.0.0/12", "fd00:10:96::/112", "nope"}}}}
	configured := []netip.Prefix{netip.MustParsePrefix("172.30.0.1/16")}

	a := allocator.New()
	l2, err := allocator.NewGroup(allocator.Group{Name: "l2", Segment: netip.MustParsePrefix("192.0.2.0/24"), L2: true})
	if err != nil {
		t.Fatal(err)
	}
	routed, err := allocator.NewGroup(allocator.Group{Name: "bgp", Segment: netip.MustParsePrefix("198.51.100.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	a.SetGroups([]*allocator.Group{l2, routed})
	peers := []paasv1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "tor-a"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.254"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tor-b"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "2001:db8::fe"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "hostile"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.0/24"}},
	}
	a.SetReserved(append(Reservations(nodes, cidrs, configured, nil), PeerReservations(peers)...))

	// What a new allocation skips, in the group that would hand the address
	// out (the routed one outside the L2 group's segment).
	reservedFor := func(addr netip.Addr) (allocator.Reservation, bool) {
		if l2.Segment.Contains(addr) {
			return a.ReservedIn(l2, addr)
		}
		return a.ReservedIn(routed, addr)
	}
	for _, tc := range []struct {
		addr, kind, holder string // kind "" means not reserved
		node               string // the claiming Node: the agent published it
	}{
		// A Node's status.addresses are its claims in every group.
		{"192.0.2.251", paasv1.ReasonReservedByNode, "the address of Node node1", "node1"},
		{"2001:db8::251", paasv1.ReasonReservedByNode, "the address of Node node1", "node1"},
		{"192.0.2.252", paasv1.ReasonReservedByNode, "the address of Node node2", "node2"},
		// What an agent publishes counts in L2 groups only, on a confirmed subnet.
		{"198.51.100.7", "", "", ""},
		{"192.0.2.99", "", "", ""},
		{"10.244.1.77", paasv1.ReasonReservedByPodCIDR, "in the pod CIDR 10.244.1.0/24 of Node node1", ""},
		{"fd00:10:244:1::5", paasv1.ReasonReservedByPodCIDR, "in the pod CIDR fd00:10:244:1::/64 of Node node1", ""},
		{"10.96.0.1", paasv1.ReasonReservedByServiceCIDR, "in the Service CIDR 10.96.0.0/12 (ServiceCIDR kubernetes)", ""},
		{"fd00:10:96::1", paasv1.ReasonReservedByServiceCIDR, "in the Service CIDR fd00:10:96::/112 (ServiceCIDR kubernetes)", ""},
		{"172.30.5.5", paasv1.ReasonReservedByServiceCIDR, "in the Service CIDR 172.30.0.0/16 (operator flag --service-cidrs)", ""},
		// Subnet edges are reserved for L2 groups only: 192.0.2.0/24 has one.
		{"192.0.2.0", paasv1.ReasonReservedBySubnet, "the network address of subnet 192.0.2.0/24 (Node node1, eth0)", "node1"},
		{"192.0.2.255", paasv1.ReasonReservedBySubnet, "the broadcast address of subnet 192.0.2.0/24 (Node node1, eth0)", "node1"},
		{"198.51.100.255", "", "", ""}, // no L2 group there
		{"203.0.113.0", "", "", ""},    // a /31 has no network or broadcast address
		{"203.0.113.1", "", "", ""},
		{"192.0.2.10", "", "", ""},
		{"192.0.2.1", paasv1.ReasonReservedByGateway, "the default gateway of Node node1 on eth0", "node1"},
		{"198.51.100.1", "", "", ""},
		// BGPPeers' addresses are the cluster's reservations (an admin wrote
		// them); one that is no address reserves nothing.
		{"198.51.100.254", paasv1.ReasonReservedByBGPPeer, "the address of BGPPeer tor-a", ""},
		{"2001:db8::fe", paasv1.ReasonReservedByBGPPeer, "the address of BGPPeer tor-b", ""},
		{"198.51.100.2", "", "", ""},
	} {
		r, ok := reservedFor(netip.MustParseAddr(tc.addr))
		if ok != (tc.kind != "") || r.Kind != tc.kind || r.Holder != tc.holder || r.Node != tc.node {
			t.Errorf("%s: reserved=%v kind=%q holder=%q node=%q, want kind=%q holder=%q node=%q", tc.addr, ok, r.Kind, r.Holder, r.Node, tc.kind, tc.holder, tc.node)
		}
	}
}
