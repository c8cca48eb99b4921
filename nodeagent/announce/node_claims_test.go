package announce

import (
	"context"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/changes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/trust"
)

// TestNodeClaimsCostOnlyTheNode: node "evil" publishes a NodeView naming the
// VIPs of web and db as its addresses (status.addresses as its agent copies
// them) and its interfaces. The agent of node1 reads it as every agent does:
// both VIPs are still carried, and the election never gives them to evil. The
// kubelet-written address of node1's own Node is still refused. Node
// "other" lists api's VIP among its status.addresses, read from the Node
// itself: node1 carries it all the same, and the election never gives it to
// other.
func TestNodeClaimsCostOnlyTheNode(t *testing.T) {
	ctx := context.Background()
	svc, ledger := uidService, lanLedger
	self := agentNode("node1", "192.0.2.251")
	evil := &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: "evil"}, Spec: paasv1.NodeViewSpec{
		Interfaces: []paasv1.NodeViewInterface{{Name: "eth0", Addrs: []string{"192.0.2.250/24", "192.0.2.10/32", "192.0.2.20/32"}}},
		Addresses: []paasv1.NodeViewAddress{{Type: string(corev1.NodeInternalIP), Address: "192.0.2.250"},
			{Type: string(corev1.NodeInternalIP), Address: "192.0.2.10"}, {Type: string(corev1.NodeExternalIP), Address: "192.0.2.20"}}}}
	good := &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: "good"}, Spec: paasv1.NodeViewSpec{
		Interfaces: []paasv1.NodeViewInterface{{Name: "eth0", Addrs: []string{"192.0.2.252/24"}}},
		Addresses:  []paasv1.NodeViewAddress{{Type: string(corev1.NodeInternalIP), Address: "192.0.2.252"}}}}
	c := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).WithObjects(
		&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24"}},
		self, evil, good, agentNode("other", "192.0.2.30"),
		svc("api", "192.0.2.30"), ledger("192.0.2.30", "api"), // listed by Node other
		svc("web", "192.0.2.10"), ledger("192.0.2.10", "web"),
		svc("db", "192.0.2.20"), ledger("192.0.2.20", "db"),
		svc("noded", "192.0.2.251"), ledger("192.0.2.251", "noded"), // the kubelet's address of node1
	).Build()
	a := &Announcer{Client: c, NodeName: "node1", Liveness: staticLiveness{"node1": false, "evil": false, "good": false, "other": false},
		LocalAddresses: func() (map[netip.Addr]string, error) { return nil, nil }}
	o, _, err := a.observe(ctx, changes.Set{})
	if err != nil {
		t.Fatal(err)
	}
	if got := addrStrings(o.vips); len(got) != 3 || got[0] != "192.0.2.10" || got[1] != "192.0.2.20" || got[2] != "192.0.2.30" {
		t.Fatalf("announced %v, want 192.0.2.10, 192.0.2.20 and 192.0.2.30 (not node1's own 192.0.2.251)", got)
	}
	if len(o.alive) != 4 {
		t.Fatalf("alive %v, want 4 nodes", o.alive)
	}
	claimer := map[string]string{"192.0.2.10": "evil", "192.0.2.20": "evil", "192.0.2.30": "other"}
	for vip, cand := range o.vips {
		owner, _, ok := election.Owner(vip, cand.Candidacy, o.alive)
		if !ok || owner == claimer[vip.String()] {
			t.Errorf("%s: owner %q (%v), want a node that does not claim it", vip, owner, ok)
		}
		for _, n := range election.Advertisers(vip, cand.Candidacy, o.alive) {
			if n == claimer[vip.String()] {
				t.Errorf("%s: %s advertises it by BGP", vip, n)
			}
		}
	}

	// The data plane decides with the same trust view.
	var services corev1.ServiceList
	if err := c.List(ctx, &services); err != nil {
		t.Fatal(err)
	}
	local, err := nodes.OwnAddresses(a.LocalAddresses)
	if err != nil {
		t.Fatal(err)
	}
	view, err := trust.Read(ctx, c, nil, "node1", services.Items, false, local)
	if err != nil {
		t.Fatal(err)
	}
	for i := range services.Items {
		s := &services.Items[i]
		vip := netip.MustParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
		r, refused := view.RefusalOf(s, vip)
		if wantRefused := s.Name == "noded"; refused != wantRefused || (refused && (r.Reason != paasv1.ReasonNodeAddress || !r.Local())) {
			t.Errorf("%s %s: refused %v (%s), want refused %v", s.Name, vip, refused, r, wantRefused)
		}
	}
}

// agentNode is a Node whose agent published one interface holding ip.
func agentNode(name, ip string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
		Labels:      map[string]string{"kubernetes.io/hostname": name},
		Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","addrs":["` + ip + `/24"]}]`}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}
