package election

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestNodeOf(t *testing.T) {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "a"}, Annotations: map[string]string{
			paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","addrs":["192.0.2.11/24","2001:db8::11/64"]}]`}},
		Spec: corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeHostName, Address: "n1"},
			{Type: corev1.NodeInternalIP, Address: "2001:db8::11"}, {Type: corev1.NodeInternalIP, Address: "192.0.2.11"}}},
	}
	got := NodeOf(n)
	if got.Name != "n1" || !got.Cordoned || !got.Agent || got.Labels["zone"] != "a" || len(got.Interfaces) != 2 || got.Interfaces[1].Prefix.String() != "2001:db8::11/64" {
		t.Fatalf("NodeOf = %+v", got)
	}
	if ips := InternalIPs(n); len(ips) != 2 || ips[0].String() != "2001:db8::11" || ips[1].String() != "192.0.2.11" {
		t.Fatalf("InternalIPs = %v", ips)
	}
	if NodeOf(&corev1.Node{}).Agent {
		t.Fatal("a Node without the interfaces annotation runs no agent")
	}
}

// The operator's Announceable condition asks EligibleIn over the segment; the
// agents ask Eligible per VIP. For a VIP they must agree.
func TestEligibleInAgreesWithEligible(t *testing.T) {
	n := Node{Name: "n1", Agent: true, Interfaces: []Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.11/25")}}}
	g := &paasv1.IPGroup{Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24"}}
	c, ok := CandidacyOf(g)
	if !ok {
		t.Fatal("an L2 group without announce is announced")
	}
	for _, vip := range []string{"192.0.2.5", "192.0.2.200"} {
		addr := netip.MustParseAddr(vip)
		_, per := Eligible(n, addr, c)
		_, in := EligibleIn(n, netip.PrefixFrom(addr, 32), c)
		if per != in {
			t.Errorf("%s: Eligible %v, EligibleIn %v", vip, per, in)
		}
	}
	if _, ok := EligibleIn(n, netip.MustParsePrefix("192.0.2.0/24"), c); !ok {
		t.Error("a node with an interface on part of the segment can carry some of its VIPs")
	}
	n.Cordoned = true
	if _, ok := EligibleIn(n, netip.MustParsePrefix("192.0.2.0/24"), c); ok {
		t.Error("a cordoned node carries nothing")
	}
	bad := &paasv1.IPGroup{Spec: paasv1.IPGroupSpec{Announce: &paasv1.Announce{NodeSelector: &metav1.LabelSelector{
		MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}}}}
	if c, ok := CandidacyOf(bad); ok || Selects(c, Node{Name: "n1"}) {
		t.Error("a bad selector selects no node")
	}
	none := &paasv1.IPGroup{Spec: paasv1.IPGroupSpec{Announce: &paasv1.Announce{Mode: paasv1.AnnounceNone}}}
	if _, ok := CandidacyOf(none); ok {
		t.Error("mode None is announced by no agent")
	}
	peer := &paasv1.BGPPeer{Spec: paasv1.BGPPeerSpec{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"bgp": "yes"}}}}
	if PeerSelects(peer, Node{Name: "n1"}) || !PeerSelects(peer, Node{Name: "n2", Labels: map[string]string{"bgp": "yes"}}) {
		t.Error("PeerSelects must follow the peer's nodeSelector")
	}
}
