package election

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// TestClaimingNodeNeverCarries: a node whose agent lists a VIP among its own
// interfaces (as an address, or as the edge of a subnet it makes up) is never
// elected to answer for it on layer 2 nor advertises it by BGP, however the
// hash favours it; every other node still may, so the VIP stays carried.
func TestClaimingNodeNeverCarries(t *testing.T) {
	// Each node's kubelet lists an address on 192.0.2.0/24 and 2001:db8::/64.
	node := func(name, interfaces string) Node {
		return NodeOf(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name,
			Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: interfaces}},
			Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.200"}, {Type: corev1.NodeInternalIP, Address: "2001:db8::200"}}}})
	}
	good := []Node{
		node("good1", `[{"name":"eth0","addrs":["192.0.2.251/24"]}]`),
		node("good2", `[{"name":"eth0","addrs":["192.0.2.252/24"]}]`),
	}
	for _, tc := range []struct {
		desc    string
		evil    string // the claiming node's interfaces
		vip     string
		l2, bgp bool // whether it claims the VIP on layer 2, by BGP
	}{
		{desc: "the VIP as an interface address", evil: `[{"name":"eth0","addrs":["192.0.2.250/24","192.0.2.10/32"]}]`, vip: "192.0.2.10", l2: true, bgp: true},
		{desc: "the VIP as the network address of a /30", evil: `[{"name":"eth0","addrs":["192.0.2.250/24","192.0.2.13/30"]}]`, vip: "192.0.2.12", l2: true},
		{desc: "the VIP as the broadcast address of a /30", evil: `[{"name":"eth0","addrs":["192.0.2.250/24","192.0.2.13/30"]}]`, vip: "192.0.2.15", l2: true},
		{desc: "a /31 has no edges", evil: `[{"name":"eth0","addrs":["192.0.2.250/24","192.0.2.13/31"]}]`, vip: "192.0.2.12"},
		{desc: "an IPv6 VIP as an interface address", evil: `[{"name":"eth0","addrs":["2001:db8::250/64","2001:db8::10/128"]}]`, vip: "2001:db8::10", l2: true, bgp: true},
	} {
		vip := netip.MustParseAddr(tc.vip)
		evil := node("evil", tc.evil)
		if got := Claims(evil, vip, true); got != tc.l2 {
			t.Errorf("%s: claims on layer 2 %v, want %v", tc.desc, got, tc.l2)
		}
		if got := Claims(evil, vip, false); got != tc.bgp {
			t.Errorf("%s: claims by BGP %v, want %v", tc.desc, got, tc.bgp)
		}
		// Every good node out but one, at a time: the claiming node is never
		// the owner while it claims, and the VIP always has one.
		for _, g := range good {
			nodes := []Node{evil, g}
			if vip.Is6() {
				g6 := g
				g6.Interfaces = []Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("2001:db8::251/64")}}
				nodes = []Node{evil, g6}
			}
			owner, _, ok := Owner(vip, Candidacy{}, nodes)
			if !ok || (tc.l2 && owner == "evil") {
				t.Errorf("%s: owner %q %v with %s", tc.desc, owner, ok, g.Name)
			}
			if adv := Advertisers(vip, Candidacy{}, nodes); slices.Contains(adv, "evil") == tc.bgp || !slices.Contains(adv, g.Name) {
				t.Errorf("%s: advertisers %v with %s", tc.desc, adv, g.Name)
			}
		}
		if _, _, ok := Owner(vip, Candidacy{}, []Node{evil}); ok == tc.l2 {
			t.Errorf("%s: alone, the claiming node owns it: %v, want %v", tc.desc, ok, !tc.l2)
		}
	}
}
