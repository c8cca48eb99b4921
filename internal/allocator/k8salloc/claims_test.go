package k8salloc

import (
	"fmt"
	"maps"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// claimingNode is a Node with its kubelet's address (none: "") and the
// interfaces its agent publishes.
func claimingNode(name, kubelet, interfaces string) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: interfaces}}}
	if kubelet != "" {
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: kubelet}}
	}
	return n
}

// TestNodeClaimsOfHeldAddresses: a node whose agent lists other Services'
// VIPs among its interfaces (as an address, or as the network or broadcast
// address of a subnet it makes up) takes nothing from them. Each step sets the
// Nodes, then reads what the operator acts on: the conflicts of the holders
// (what would mark their ledger reservedBy and stop every agent) and the
// claims (the claiming node's own conflict).
func TestNodeClaimsOfHeldAddresses(t *testing.T) {
	a := allocator.New()
	g, err := allocator.NewGroup(allocator.Group{Name: "l2", Segment: netip.MustParsePrefix("192.0.2.0/24"), L2: true, AutoAssign: true})
	if err != nil {
		t.Fatal(err)
	}
	a.SetGroups([]*allocator.Group{g})
	ip := netip.MustParseAddr
	for key, addr := range map[string]string{"ns/web": "192.0.2.10", "ns/db": "192.0.2.12", "ns/api": "192.0.2.30"} {
		if err := a.Assign(key, ip(addr)); err != nil {
			t.Fatal(err)
		}
	}
	for _, s := range []struct {
		desc          string
		nodes         []corev1.Node
		wantConflicts map[string]string   // holder key -> reserved address
		wantClaims    map[string][]string // held address -> claiming nodes
		wantFree      string              // what the next allocation gets
	}{{
		desc: "a node lists web's VIP as its address and makes db's the network address of a /30",
		nodes: []corev1.Node{
			claimingNode("evil", "192.0.2.250", `[{"name":"eth0","addrs":["192.0.2.250/24","192.0.2.10/32","192.0.2.13/30"]}]`),
			claimingNode("good", "192.0.2.251", `[{"name":"eth0","addrs":["192.0.2.251/24"]}]`),
		},
		wantConflicts: map[string]string{},
		wantClaims:    map[string][]string{"192.0.2.10": {"evil"}, "192.0.2.12": {"evil"}},
		wantFree:      "192.0.2.1",
	}, {
		desc: "two nodes claim one VIP: each on the subnet is named, the holder keeps it",
		nodes: []corev1.Node{
			claimingNode("evil", "192.0.2.250", `[{"name":"eth0","addrs":["192.0.2.10/24"]}]`),
			claimingNode("evil2", "192.0.2.249", `[{"name":"eth0","addrs":["192.0.2.10/24","192.0.2.1/32","192.0.2.2/32"]}]`),
		},
		wantConflicts: map[string]string{},
		wantClaims:    map[string][]string{"192.0.2.10": {"evil", "evil2"}},
		wantFree:      "192.0.2.3", // free claimed addresses are skipped
	}, {
		desc: "a node no status address puts on the subnet: its claims count for nothing",
		nodes: []corev1.Node{
			claimingNode("evil", "", `[{"name":"eth0","addrs":["192.0.2.10/24","192.0.2.1/32","192.0.2.2/32"],"gateways":["192.0.2.3"]}]`),
		},
		wantConflicts: map[string]string{},
		wantClaims:    map[string][]string{},
		wantFree:      "192.0.2.0",
	}, {
		desc: "a node's default gateways: a free one stops new allocations, web's VIP named as one stays web's",
		nodes: []corev1.Node{
			claimingNode("gw", "192.0.2.252", `[{"name":"eth0","addrs":["192.0.2.252/24"],"gateways":["192.0.2.1","192.0.2.10"]}]`),
		},
		wantConflicts: map[string]string{},
		wantClaims:    map[string][]string{"192.0.2.10": {"gw"}},
		wantFree:      "192.0.2.2",
	}, {
		desc:          "a Node's status.addresses lists api's VIP: the node's conflict, api keeps it",
		nodes:         []corev1.Node{claimingNode("later", "192.0.2.30", `[{"name":"eth0","addrs":["192.0.2.30/24"]}]`)},
		wantConflicts: map[string]string{},
		wantClaims:    map[string][]string{"192.0.2.30": {"later"}},
		wantFree:      "192.0.2.1",
	}, {
		desc:          "a free address a Node's status.addresses lists is never handed out",
		nodes:         []corev1.Node{claimingNode("n1", "192.0.2.0", "")},
		wantConflicts: map[string]string{},
		wantClaims:    map[string][]string{},
		wantFree:      "192.0.2.1",
	}} {
		a.SetReserved(Reservations(s.nodes, nil, nil, nil))
		conflicts := map[string]string{}
		for key, addrs := range a.Conflicts() {
			for addr := range addrs {
				conflicts[key] = addr.String()
			}
		}
		if !maps.Equal(conflicts, s.wantConflicts) {
			t.Errorf("%s: conflicts %v, want %v", s.desc, conflicts, s.wantConflicts)
		}
		claims := map[string][]string{}
		for addr, cs := range a.Claims() {
			for _, c := range cs {
				claims[addr.String()] = append(claims[addr.String()], c.Node)
			}
		}
		if len(claims) != len(s.wantClaims) {
			t.Errorf("%s: claims %v, want %v", s.desc, claims, s.wantClaims)
		}
		for addr, want := range s.wantClaims {
			if !slices.Equal(claims[addr], want) {
				t.Errorf("%s: claims of %s %v, want %v", s.desc, addr, claims[addr], want)
			}
		}
		got, err := a.Allocate("ns/new", allocator.Request{Families: []allocator.Family{allocator.IPv4}})
		if err != nil || len(got) != 1 || got[0].String() != s.wantFree {
			t.Errorf("%s: a new Service got %v (%v), want %s", s.desc, got, err, s.wantFree)
		}
		a.Release("ns/new")
	}
}

// The operator's claims and the agents' election read one annotation: every
// address the operator names a node for, the election keeps from that node.
func TestNodeClaimsAgreeWithElection(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","addrs":["192.0.2.250/24","192.0.2.13/30","198.51.100.1/31","2001:db8::10/64"],"gateways":["192.0.2.1","2001:db8::1"]}]`}}}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.250"}, {Type: corev1.NodeInternalIP, Address: "2001:db8::10"}}
	en := election.NodeOf(n)
	claims := NodeClaims(n, nil)
	if len(claims) != 9 {
		t.Fatalf("claims %v, want 2 gateways, 3 addresses and the edges of 2 subnets (198.51.100.1/31 is on no confirmed subnet)", claims)
	}
	for _, c := range claims {
		if addr := c.Prefix.Addr(); c.Node != "n1" || !c.L2Only || !election.Claims(en, addr, true) {
			t.Errorf("%s (L2 only %v): the election disagrees", addr, c.L2Only)
		}
	}
	for _, c := range NodeAddresses(n) {
		if addr := c.Prefix.Addr(); c.Node != "n1" || c.L2Only || !election.Claims(en, addr, false) {
			t.Errorf("%s: the election lets the Node listing it carry it", addr)
		}
	}
}

// TestNodeClaimsBounded: what one node's agent publishes keeps at most
// MaxClaimsPerNode addresses out of the pools, only on a subnet the node is
// really on (a status address or a layer-2 group's gateway on it), and only in
// groups announced on layer 2.
func TestNodeClaimsBounded(t *testing.T) {
	a := allocator.New()
	l2, err := allocator.NewGroup(allocator.Group{Name: "l2", Segment: netip.MustParsePrefix("192.0.2.0/24"), L2: true, AutoAssign: true})
	if err != nil {
		t.Fatal(err)
	}
	routed, err := allocator.NewGroup(allocator.Group{Name: "bgp", Segment: netip.MustParsePrefix("198.51.100.0/24"), AutoAssign: true})
	if err != nil {
		t.Fatal(err)
	}
	a.SetGroups([]*allocator.Group{l2, routed})
	many := func(prefix string, n int) string {
		var addrs []string
		for i := range n {
			addrs = append(addrs, fmt.Sprintf("%q", fmt.Sprintf("%s.%d/32", prefix, i+1)))
		}
		return strings.Join(addrs, ",")
	}
	free := func(g *allocator.Group) *big.Int {
		return new(big.Int).Sub(g.Capacity(), a.ReservedCount(g))
	}
	for _, s := range []struct {
		desc            string
		node            corev1.Node
		routers         []netip.Addr
		wantL2, wantBGP int64 // free addresses left
	}{{
		desc:   "a 4 KB annotation on the node's LAN takes MaxClaimsPerNode addresses, not the /24",
		node:   claimingNode("evil", "192.0.2.254", `[{"name":"eth0","addrs":["192.0.2.254/24",`+many("192.0.2", 200)+`]}]`),
		wantL2: 256 - MaxClaimsPerNode, wantBGP: 256,
	}, {
		desc:   "a subnet no status address confirms: nothing",
		node:   claimingNode("evil", "203.0.113.5", `[{"name":"eth0","addrs":["192.0.2.7/24","192.0.2.8/32"],"gateways":["192.0.2.1"]}]`),
		wantL2: 256, wantBGP: 256,
	}, {
		desc:    "a subnet the group's gateway confirms counts, as for announcing",
		node:    claimingNode("n1", "203.0.113.5", `[{"name":"eth0","addrs":["192.0.2.7/24"],"gateways":["192.0.2.1"]}]`),
		routers: []netip.Addr{netip.MustParseAddr("192.0.2.1")},
		wantL2:  256 - 4, wantBGP: 256, // the address, the gateway and the subnet's two edges
	}, {
		desc:   "a BGP group's addresses on the node's own link: claims are layer 2 only",
		node:   claimingNode("n1", "198.51.100.9", `[{"name":"eth0","addrs":["198.51.100.9/24",`+many("198.51.100", 10)+`],"gateways":["198.51.100.1"]}]`),
		wantL2: 256, wantBGP: 256 - 1, // only the status address
	}} {
		a.SetReserved(Reservations([]corev1.Node{s.node}, nil, nil, s.routers))
		if got := free(l2); got.Int64() != s.wantL2 {
			t.Errorf("%s: %d free in the L2 group, want %d", s.desc, got, s.wantL2)
		}
		if got := free(routed); got.Int64() != s.wantBGP {
			t.Errorf("%s: %d free in the BGP group, want %d", s.desc, got, s.wantBGP)
		}
	}
}
