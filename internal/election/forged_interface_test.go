package election

import (
	"fmt"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// node is a Node whose agent published ifaces (the annotation's JSON) and
// whose kubelet lists addrs as its InternalIPs.
func node(name, ifaces string, addrs ...string) *corev1.Node {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: ifaces}}}
	for _, a := range addrs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: a})
	}
	return n
}

// A node's agent token writes what the node publishes about itself: it must
// not make that node the owner of addresses on a subnet it is not on.
func TestForgedInterfaceOwnsNothing(t *testing.T) {
	honest := []*corev1.Node{
		node("h1", `[{"name":"eth0","addrs":["198.51.100.11/24"]}]`, "198.51.100.11"),
		node("h2", `[{"name":"eth0","addrs":["198.51.100.12/24"]}]`, "198.51.100.12"),
		node("h3", `[{"name":"eth0","addrs":["198.51.100.13/24"]}]`, "198.51.100.13"),
	}
	gw := &paasv1.Gateway{IPv4: "198.51.100.1"}
	for _, tc := range []struct {
		name, ifaces string
		gateway      *paasv1.Gateway
	}{
		{"a /0 interface", `[{"name":"eth0","addrs":["203.0.113.7/0"]}]`, nil},
		{"a /0 interface, the group naming its router", `[{"name":"eth0","addrs":["203.0.113.7/0"]}]`, gw},
		{"a /8 interface", `[{"name":"eth0","addrs":["198.0.0.7/8"]}]`, nil},
		{"an IPv4-mapped /0", `[{"name":"eth0","addrs":["::ffff:203.0.113.7/0"]}]`, nil},
		{"the subnet, no Node address on it", `[{"name":"eth0","addrs":["203.0.113.7/24"]},{"name":"eth1","addrs":["198.51.100.77/24"]}]`, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			g := &paasv1.IPGroup{Spec: paasv1.IPGroupSpec{Segment: "198.51.100.0/24", Announce: &paasv1.Announce{Gateway: tc.gateway}}}
			c, ok := CandidacyOf(g)
			if !ok {
				t.Fatal("an L2 group is announced")
			}
			var nodes []Node
			for _, n := range append(honest, node("attacker", tc.ifaces, "203.0.113.7")) {
				nodes = append(nodes, NodeOf(n))
			}
			owned, served := 0, 0
			for i := 2; i <= 252; i++ {
				vip := netip.MustParseAddr(fmt.Sprintf("198.51.100.%d", i))
				owner, _, ok := Owner(vip, c, nodes)
				if ok {
					served++
				}
				if owner == "attacker" {
					owned++
				}
			}
			if owned != 0 || served != 251 {
				t.Errorf("the node on no interface of 198.51.100.0/24 owns %d of its 251 addresses (%d served)", owned, served)
			}
			if _, ok := EligibleIn(NodeOf(node("attacker", tc.ifaces, "203.0.113.7")), netip.MustParsePrefix("198.51.100.0/24"), c); ok {
				t.Error("the operator's Announceable counts the node on the segment")
			}
		})
	}
}

// An interface's subnet counts when a Node address is on it, or the group's
// router: a node on a second network its kubelet does not list.
func TestInterfaceConfirmation(t *testing.T) {
	for _, tc := range []struct {
		name    string
		n       *corev1.Node
		gateway *paasv1.Gateway
		want    bool
	}{
		{"the InternalIP on the subnet", node("n", `[{"name":"eth0","addrs":["198.51.100.11/24"]}]`, "198.51.100.11"), nil, true},
		{"an InternalIP elsewhere on the subnet", node("n", `[{"name":"eth0","addrs":["198.51.100.11/24"]}]`, "198.51.100.200"), nil, true},
		{"a second network, no gateway", node("n", `[{"name":"eth1","addrs":["198.51.100.11/24"]}]`, "10.0.0.5"), nil, false},
		{"a second network, the group's router on it", node("n", `[{"name":"eth1","addrs":["198.51.100.11/24"]}]`, "10.0.0.5"), &paasv1.Gateway{IPv4: "198.51.100.1"}, true},
		{"a second network, the group's router elsewhere", node("n", `[{"name":"eth1","addrs":["198.51.100.11/24"]}]`, "10.0.0.5"), &paasv1.Gateway{IPv4: "10.0.0.1"}, false},
		{"a /16", node("n", `[{"name":"eth0","addrs":["198.51.7.11/16"]}]`, "198.51.7.11"), nil, true},
		{"a /15", node("n", `[{"name":"eth0","addrs":["198.50.7.11/15"]}]`, "198.50.7.11"), nil, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, _ := CandidacyOf(&paasv1.IPGroup{Spec: paasv1.IPGroupSpec{Announce: &paasv1.Announce{Gateway: tc.gateway}}})
			if _, ok := Eligible(NodeOf(tc.n), netip.MustParseAddr("198.51.100.50"), c); ok != tc.want {
				t.Errorf("Eligible = %v, want %v", ok, tc.want)
			}
		})
	}
}

// A node still claims its own address whatever the prefix it gives it.
func TestImplausiblePrefixStillClaimsTheAddress(t *testing.T) {
	n := NodeOf(node("n", `[{"name":"eth0","addrs":["203.0.113.7/0","2001:db8::7/0"]}]`, "203.0.113.7"))
	for _, a := range []string{"203.0.113.7", "2001:db8::7"} {
		if !Claims(n, netip.MustParseAddr(a), true) {
			t.Errorf("%s is the node's own address", a)
		}
	}
	if got := n.Interfaces[0].Prefix.String(); got != "203.0.113.7/32" {
		t.Errorf("read as %s, want the address alone", got)
	}
}
