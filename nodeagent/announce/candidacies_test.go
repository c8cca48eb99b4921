package announce

import (
	"context"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// TestAnnouncerCandidacies: the announcer announces only what the data plane
// would carry (package trust): not a forged status, not a ledger naming another
// Service, not this node's own (its Node's address, one on its interfaces);
// the ledger's own VIPs are, another Node's address too (that Node's conflict,
// the election keeps it from that Node).
func TestAnnouncerCandidacies(t *testing.T) {
	svc, ledger := uidService, lanLedger
	legacy := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.14", Labels: map[string]string{paasv1.IPGroupLabel: "lan"},
		Annotations: map[string]string{paasv1.OwnerAnnotation: "ns/orphan"}}}
	objs := []client.Object{
		&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node9"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.12"}}}},
		svc("web", "192.0.2.10"), ledger("192.0.2.10", "web"), // allocated: announced
		svc("forged", "192.0.2.11"), // no ledger object
		svc("thief", "192.0.2.10"),  // the ledger names web
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.15"}}}},
		svc("noded", "192.0.2.12"), ledger("192.0.2.12", "noded"), // another Node's address
		svc("self", "192.0.2.15"), ledger("192.0.2.15", "self"), // this Node's address
		svc("local", "192.0.2.13"), ledger("192.0.2.13", "local"), // on this node's interface
		svc("orphan", "192.0.2.14"), legacy, // a ledger object naming no Service by uid
	}
	c := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).WithObjects(objs...).Build()
	a := &Announcer{Client: c, NodeName: "node1",
		LocalAddresses: func() (map[netip.Addr]string, error) {
			return map[netip.Addr]string{netip.MustParseAddr("192.0.2.13"): "eth0"}, nil
		}}
	got, entries, err := a.candidacies(context.Background(), map[string]*paasv1.IP{
		"192.0.2.10": ledger("192.0.2.10", "web"), "192.0.2.12": ledger("192.0.2.12", "noded"),
		"192.0.2.13": ledger("192.0.2.13", "local"), "192.0.2.14": legacy, "192.0.2.15": ledger("192.0.2.15", "self")})
	if err != nil {
		t.Fatal(err)
	}
	var vips []string
	for v := range got {
		vips = append(vips, v.String())
	}
	slices.Sort(vips)
	if !slices.Equal(vips, []string{"192.0.2.10", "192.0.2.12"}) || len(entries) != 2 {
		t.Fatalf("announced %v, want only 192.0.2.10 and 192.0.2.12", vips)
	}
}
