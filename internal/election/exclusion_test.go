package election

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Nodes labelled node.kubernetes.io/exclude-from-external-load-balancers
// never carry VIPs; whether cordon moves them is a choice.

func TestEligibility(t *testing.T) {
	onLAN := []Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.11/24")}}
	node := func(labels map[string]string, cordoned bool) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: labels}, Spec: corev1.NodeSpec{Unschedulable: cordoned}}
		return n
	}
	exclude := corev1.LabelNodeExcludeBalancers
	for _, tc := range []struct {
		desc     string
		node     *corev1.Node
		policy   OnCordon
		draining bool
		want     bool
	}{
		{desc: "a plain node", node: node(nil, false), policy: OnCordonHandover, want: true},
		{desc: "excluded, empty value", node: node(map[string]string{exclude: ""}, false), policy: OnCordonHandover, want: false},
		{desc: "excluded, value true", node: node(map[string]string{exclude: "true"}, false), policy: OnCordonHandover, want: false},
		{desc: "excluded, value false: any value excludes, as Kubernetes defines it", node: node(map[string]string{exclude: "false"}, false), policy: OnCordonHandover, want: false},
		{desc: "excluded under keep too", node: node(map[string]string{exclude: ""}, false), policy: OnCordonKeep, want: false},
		{desc: "a similar label does not exclude", node: node(map[string]string{"node.kubernetes.io/exclude-from-external-load-balancer": ""}, false), policy: OnCordonHandover, want: true},
		{desc: "cordoned, handover (the default): hands over", node: node(nil, true), policy: OnCordonHandover, want: false},
		{desc: "cordoned, keep: keeps", node: node(nil, true), policy: OnCordonKeep, want: true},
		{desc: "cordoned and draining, keep: draining still hands over", node: node(nil, true), policy: OnCordonKeep, draining: true, want: false},
		{desc: "cordoned and excluded, keep", node: node(map[string]string{exclude: ""}, true), policy: OnCordonKeep, want: false},
	} {
		n := tc.policy.NodeOf(tc.node)
		n.Draining = tc.draining
		n.Interfaces = onLAN
		_, l2 := Eligible(n, netip.MustParseAddr("192.0.2.100"), Candidacy{})
		bgp := slices.Contains(Advertisers(netip.MustParseAddr("192.0.2.100"), Candidacy{}, []Node{n}), "n1")
		if l2 != tc.want || bgp != tc.want || Allowed(n, Candidacy{}) != tc.want {
			t.Errorf("%s: L2 eligible %v, BGP advertiser %v, want %v", tc.desc, l2, bgp, tc.want)
		}
	}
}

// NodeOf keeps today's behaviour: cordon hands over.
func TestNodeOfIsHandover(t *testing.T) {
	n := &corev1.Node{Spec: corev1.NodeSpec{Unschedulable: true}}
	if !NodeOf(n).Cordoned || OnCordonKeep.NodeOf(n).Cordoned {
		t.Fatal("NodeOf must apply the handover policy, OnCordonKeep.NodeOf the keep policy")
	}
}

func TestOwnerSkipsExcluded(t *testing.T) {
	lan := []Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.10/24")}}
	nodes := []Node{{Name: "node1", Interfaces: lan}, {Name: "node2", Interfaces: lan}, {Name: "node3", Interfaces: lan}}
	vip := netip.MustParseAddr("192.0.2.100")
	first, _, ok := Owner(vip, Candidacy{}, nodes)
	if !ok {
		t.Fatal("no owner among three nodes")
	}
	i := slices.IndexFunc(nodes, func(n Node) bool { return n.Name == first })
	nodes[i].Excluded = true
	second, _, ok := Owner(vip, Candidacy{}, nodes)
	if !ok || second == first {
		t.Fatalf("owner %s excluded, new owner %q (%v)", first, second, ok)
	}
	nodes[i].Excluded = false
	if back, _, _ := Owner(vip, Candidacy{}, nodes); back != first {
		t.Fatalf("removing the label gives the VIP back to %s, got %s", first, back)
	}
}

func TestParseOnCordon(t *testing.T) {
	for in, want := range map[string]OnCordon{"": OnCordonHandover, "handover": OnCordonHandover, "keep": OnCordonKeep} {
		if got, err := ParseOnCordon(in); err != nil || got != want {
			t.Errorf("%q: %v %v", in, got, err)
		}
	}
	if _, err := ParseOnCordon("Keep"); err == nil {
		t.Error("Keep accepted")
	}
}
