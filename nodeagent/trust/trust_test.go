package trust

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// TestNodeAddresses: every address this node's Node reports, whatever its
// type; names skipped; another Node's addresses are not this node's to refuse.
func TestNodeAddresses(t *testing.T) {
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "192.0.2.251"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.5"},
		{Type: corev1.NodeInternalIP, Address: "2001:db8::251"}, {Type: corev1.NodeHostName, Address: "n1"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "n2"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}}}}}
	got := NodeAddresses(nodes, "n1")
	if len(got) != 3 || got[netip.MustParseAddr("203.0.113.5")] != "n1" || got[netip.MustParseAddr("2001:db8::251")] != "n1" {
		t.Fatalf("%v", got)
	}
}

// TestRefusalOf: the rule alone, in its order: this Node's address first (it
// cuts the node off), then one on this node's interfaces (unless keepalived
// holds it for a migration), then a reservation, then the ledger. Both of
// this node's are its own refusals (Local): the other nodes carry the address.
func TestRefusalOf(t *testing.T) {
	const web = types.UID("uid-web")
	a := netip.MustParseAddr
	v := View{
		Holders:    map[netip.Addr][]types.UID{a("192.0.2.10"): {web}, a("192.0.2.251"): {web}, a("192.0.2.50"): {web}, a("192.0.2.60"): {web}, a("192.0.2.70"): {web}},
		Reserved:   map[netip.Addr]string{a("192.0.2.70"): "Node node2", a("192.0.2.50"): "Node node3"},
		NodeAddrs:  map[netip.Addr]string{a("192.0.2.251"): "node1"},
		Local:      map[netip.Addr]string{a("192.0.2.50"): "eth1", a("192.0.2.60"): "eth1", a("192.0.2.251"): "eth0"},
		Keepalived: map[netip.Addr]bool{a("192.0.2.60"): true},
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: web}}
	for _, tc := range []struct {
		desc string
		svc  *corev1.Service
		vip  string
		want string // a Reason*, "" when carried
	}{
		{"given by the ledger", svc, "192.0.2.10", ""},
		{"IPv4-mapped reads as IPv4", svc, "::ffff:192.0.2.10", ""},
		{"this Node's address before one on its interfaces", svc, "192.0.2.251", paasv1.ReasonNodeAddress},
		{"this node's own before a reservation", svc, "192.0.2.50", paasv1.ReasonLocalAddress},
		{"this node's own, held by keepalived for a migration", svc, "192.0.2.60", ""},
		{"reserved in the cluster", svc, "192.0.2.70", paasv1.ReasonReserved},
		{"no ledger object", svc, "192.0.2.99", paasv1.ReasonNotInLedger},
		{"a Service with no uid is given nothing", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}}, "192.0.2.10", paasv1.ReasonNotInLedger},
	} {
		r, refused := v.RefusalOf(tc.svc, a(tc.vip))
		if refused != (tc.want != "") || r.Reason != tc.want {
			t.Errorf("%s: refused %v, reason %q; want %q", tc.desc, refused, r.Reason, tc.want)
		}
		if refused && (r.VIP != a(tc.vip).Unmap() || r.Local() != (tc.want == paasv1.ReasonLocalAddress || tc.want == paasv1.ReasonNodeAddress)) {
			t.Errorf("%s: refusal %+v names the wrong address or scope", tc.desc, r)
		}
	}
}
