package election

import (
	"fmt"
	"net/netip"
	"slices"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

func lan(name, addr string, lbls ...string) Node {
	n := Node{Name: name, Labels: labels.Set{}, Interfaces: []Interface{
		{Name: "lo", Prefix: netip.MustParsePrefix("127.0.0.1/8")},
		{Name: "eth0", Prefix: netip.MustParsePrefix(addr)},
	}}
	for i := 0; i+1 < len(lbls); i += 2 {
		n.Labels[lbls[i]] = lbls[i+1]
	}
	return n
}

func TestEligible(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.100")
	rack := labels.SelectorFromSet(labels.Set{"rack": "a"})
	tests := []struct {
		desc      string
		node      Node
		c         Candidacy
		wantIface string
		wantOK    bool
	}{
		{"interface on the subnet", lan("n1", "192.0.2.11/24"), Candidacy{}, "eth0", true},
		{"no interface on the subnet", lan("n1", "198.51.100.11/24"), Candidacy{}, "", false},
		{"cordoned", func() Node { n := lan("n1", "192.0.2.11/24"); n.Cordoned = true; return n }(), Candidacy{}, "", false},
		{"draining", func() Node { n := lan("n1", "192.0.2.11/24"); n.Draining = true; return n }(), Candidacy{}, "", false},
		{"selector matches", lan("n1", "192.0.2.11/24", "rack", "a"), Candidacy{Selector: rack}, "eth0", true},
		{"selector does not match", lan("n1", "192.0.2.11/24", "rack", "b"), Candidacy{Selector: rack}, "", false},
		{"named interface", lan("n1", "192.0.2.11/24"), Candidacy{Interfaces: []string{"eth0"}}, "eth0", true},
		{"other interface named", lan("n1", "192.0.2.11/24"), Candidacy{Interfaces: []string{"eth1"}}, "", false},
		{"local endpoint here", lan("n1", "192.0.2.11/24"), Candidacy{LocalNodes: map[string]bool{"n1": true}}, "eth0", true},
		{"Local policy, no endpoint here", lan("n1", "192.0.2.11/24"), Candidacy{LocalNodes: map[string]bool{"n2": true}}, "", false},
		{"Local policy, no endpoint anywhere", lan("n1", "192.0.2.11/24"), Candidacy{LocalNodes: map[string]bool{}}, "", false},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			iface, ok := Eligible(tt.node, vip, tt.c)
			if iface != tt.wantIface || ok != tt.wantOK {
				t.Errorf("Eligible = %q, %v; want %q, %v", iface, ok, tt.wantIface, tt.wantOK)
			}
		})
	}
}

// vips are n addresses of 192.0.2.0/24 and 198.51.100.0/24.
func vips(n int) []netip.Addr {
	var out []netip.Addr
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("198.51.100.1")
	for i := 0; i < n; i++ {
		if i%2 == 0 {
			out, a = append(out, a), a.Next()
		} else {
			out, b = append(out, b), b.Next()
		}
	}
	return out
}

func nodes(n int) []Node {
	var out []Node
	for i := 0; i < n; i++ {
		nd := lan(fmt.Sprintf("node-%d", i), fmt.Sprintf("192.0.2.%d/24", 200+i))
		nd.Interfaces = append(nd.Interfaces, Interface{Name: "eth1", Prefix: netip.MustParsePrefix(fmt.Sprintf("198.51.100.%d/24", 200+i))})
		out = append(out, nd)
	}
	return out
}

func owners(t *testing.T, addrs []netip.Addr, ns []Node) map[netip.Addr]string {
	t.Helper()
	out := map[netip.Addr]string{}
	for _, v := range addrs {
		node, _, ok := Owner(v, Candidacy{}, ns)
		if !ok {
			t.Fatalf("no owner for %s", v)
		}
		out[v] = node
	}
	return out
}

// Each step changes the set of nodes; only the VIPs that must move do.
func TestOwnerMovesOnlyWhatMust(t *testing.T) {
	addrs := vips(240)
	all := nodes(4)
	steps := []struct {
		desc  string
		nodes []Node
	}{
		{"four nodes", all},
		{"node-2 dies", []Node{all[0], all[1], all[3]}},
		{"node-2 is back", all},
		{"node-4 joins", append(append([]Node{}, all...), nodes(5)[4])},
	}
	var prev map[netip.Addr]string
	for _, st := range steps {
		cur := owners(t, addrs, st.nodes)
		names := map[string]bool{}
		count := map[string]int{}
		for _, n := range st.nodes {
			names[n.Name] = true
		}
		for _, o := range cur {
			count[o]++
		}
		// Spread: every node carries a fair share (within half of the mean).
		mean := len(addrs) / len(st.nodes)
		for n := range names {
			if count[n] < mean/2 || count[n] > mean*3/2 {
				t.Errorf("%s: %s carries %d VIPs, mean %d: %v", st.desc, n, count[n], mean, count)
			}
		}
		if prev != nil {
			for v, o := range cur {
				was := prev[v]
				// A VIP may move only off a node that left, or onto a node that joined.
				if o != was && names[was] && o != newcomer(prev, st.nodes) {
					t.Errorf("%s: %s moved %s → %s needlessly", st.desc, v, was, o)
				}
			}
		}
		prev = cur
	}
}

// newcomer is the node of ns that owned nothing before (joined this step), or "".
func newcomer(prev map[netip.Addr]string, ns []Node) string {
	held := map[string]bool{}
	for _, o := range prev {
		held[o] = true
	}
	for _, n := range ns {
		if !held[n.Name] {
			return n.Name
		}
	}
	return ""
}

func TestOwnerIgnoresOrderAndPicksOnlyEligible(t *testing.T) {
	vip := netip.MustParseAddr("198.51.100.7")
	ns := nodes(3)
	a, _, _ := Owner(vip, Candidacy{}, ns)
	b, _, _ := Owner(vip, Candidacy{}, []Node{ns[2], ns[0], ns[1]})
	if a != b {
		t.Fatalf("owner depends on order: %s vs %s", a, b)
	}
	node, iface, ok := Owner(vip, Candidacy{LocalNodes: map[string]bool{"node-1": true}}, ns)
	if node != "node-1" || iface != "eth1" || !ok {
		t.Fatalf("Owner with Local endpoints on node-1 = %s %s %v", node, iface, ok)
	}
	if _, _, ok := Owner(netip.MustParseAddr("203.0.113.5"), Candidacy{}, ns); ok {
		t.Fatal("a VIP on no node's subnet got an owner")
	}
}

// A preferred node (the node another load balancer answered from) wins
// while it is eligible, whatever the hash says; when it is not, the hash
// decides as if there were no preference.
func TestOwnerPreferred(t *testing.T) {
	vip := netip.MustParseAddr("198.51.100.7")
	ns := nodes(3)
	hashed, _, _ := Owner(vip, Candidacy{}, ns)
	var other string
	for _, n := range ns {
		if n.Name != hashed {
			other = n.Name
			break
		}
	}
	cordoned := slices.Clone(ns)
	for i := range cordoned {
		cordoned[i].Cordoned = cordoned[i].Name == other
	}
	for _, tc := range []struct {
		desc      string
		c         Candidacy
		nodes     []Node
		want      string
		wantIface string
	}{
		{"no preference: the hash", Candidacy{}, ns, hashed, "eth1"},
		{"preferred and eligible", Candidacy{Preferred: other}, ns, other, "eth1"},
		{"preferred but cordoned", Candidacy{Preferred: other}, cordoned, hashed, "eth1"},
		{"preferred but not alive", Candidacy{Preferred: "node-9"}, ns, hashed, "eth1"},
		{"preferred without a local endpoint", Candidacy{Preferred: other, LocalNodes: map[string]bool{hashed: true}}, ns, hashed, "eth1"},
	} {
		node, iface, ok := Owner(vip, tc.c, tc.nodes)
		if !ok || node != tc.want || iface != tc.wantIface {
			t.Errorf("%s: Owner = %s %s %v, want %s %s", tc.desc, node, iface, ok, tc.want, tc.wantIface)
		}
	}
	if _, _, ok := Owner(netip.MustParseAddr("203.0.113.5"), Candidacy{Preferred: other}, ns); ok {
		t.Error("a preferred node got a VIP on no subnet of its")
	}
}

// IPv6 VIPs are placed like IPv4 ones: on the interface with an address on
// their subnet, whichever family the node's other interfaces have.
func TestEligibleIPv6(t *testing.T) {
	dual := lan("n1", "192.0.2.11/24")
	dual.Interfaces = append(dual.Interfaces,
		Interface{Name: "eth0", Prefix: netip.MustParsePrefix("2001:db8::11/64")},
		Interface{Name: "eth1", Prefix: netip.MustParsePrefix("2001:db8:1::11/64")})
	v4only := lan("n2", "192.0.2.12/24")
	for _, tt := range []struct {
		desc      string
		node      Node
		vip       string
		c         Candidacy
		wantIface string
		wantOK    bool
	}{
		{"IPv6 VIP on the subnet of eth0", dual, "2001:db8::100", Candidacy{}, "eth0", true},
		{"IPv6 VIP on the subnet of eth1", dual, "2001:db8:1::100", Candidacy{}, "eth1", true},
		{"IPv6 VIP on no subnet of the node", dual, "2001:db8:2::100", Candidacy{}, "", false},
		{"IPv6 VIP on a node with IPv4 only", v4only, "2001:db8::100", Candidacy{}, "", false},
		{"IPv6 VIP on an interface not allowed", dual, "2001:db8:1::100", Candidacy{Interfaces: []string{"eth0"}}, "", false},
		{"IPv4 VIP of the same node still on eth0", dual, "192.0.2.100", Candidacy{}, "eth0", true},
	} {
		t.Run(tt.desc, func(t *testing.T) {
			iface, ok := Eligible(tt.node, netip.MustParseAddr(tt.vip), tt.c)
			if iface != tt.wantIface || ok != tt.wantOK {
				t.Errorf("Eligible = %q, %v; want %q, %v", iface, ok, tt.wantIface, tt.wantOK)
			}
		})
	}
}

func TestAdvertisers(t *testing.T) {
	n1, n2, n3 := lan("n1", "198.51.100.11/24", "rack", "a"), lan("n2", "198.51.100.12/24", "rack", "b"), lan("n3", "198.51.100.13/24", "rack", "a")
	n3.Cordoned = true
	all := []Node{n3, n2, n1}
	tests := []struct {
		desc string
		c    Candidacy
		want []string
	}{
		{"every allowed node, wherever its interfaces are, sorted", Candidacy{}, []string{"n1", "n2"}},
		{"selector", Candidacy{Selector: labels.SelectorFromSet(labels.Set{"rack": "a"})}, []string{"n1"}},
		{"Local: the endpoint nodes only", Candidacy{LocalNodes: map[string]bool{"n2": true, "n3": true}}, []string{"n2"}},
		{"Local, no endpoint", Candidacy{LocalNodes: map[string]bool{}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			if got := Advertisers(netip.MustParseAddr("198.51.100.100"), tt.c, all); !slices.Equal(got, tt.want) {
				t.Errorf("Advertisers = %v, want %v", got, tt.want)
			}
		})
	}
}

// Pick spreads the recording of BGP VIPs over the advertisers and does not
// depend on their order.
func TestPick(t *testing.T) {
	names := []string{"n1", "n2", "n3"}
	count := map[string]int{}
	for _, v := range vips(300) {
		p := Pick(v, names)
		if q := Pick(v, []string{"n3", "n1", "n2"}); q != p {
			t.Fatalf("Pick(%s) depends on order: %s, %s", v, p, q)
		}
		count[p]++
	}
	for _, n := range names {
		if count[n] < 60 {
			t.Errorf("%s records %d of 300 VIPs: want them spread", n, count[n])
		}
	}
	if Pick(netip.MustParseAddr("192.0.2.1"), nil) != "" {
		t.Error("Pick among nobody must be empty")
	}
}
