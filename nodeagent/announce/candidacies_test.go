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
// Service, not a Node's address, not this node's own; the ledger's own VIP is.
func TestAnnouncerCandidacies(t *testing.T) {
	svc, ledger := uidService, lanLedger
	legacy := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.14", Labels: map[string]string{paasv1.IPGroupLabel: "lan"},
		Annotations: map[string]string{paasv1.OwnerAnnotation: "ns/orphan"}}}
	objs := []client.Object{
		&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node9"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.12"}}}},
		svc("web", "192.0.2.10"), ledger("192.0.2.10", "web"), // allocated: announced
		svc("forged", "192.0.2.11"),                               // no ledger object
		svc("thief", "192.0.2.10"),                                // the ledger names web
		svc("noded", "192.0.2.12"), ledger("192.0.2.12", "noded"), // a Node's address
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
		"192.0.2.13": ledger("192.0.2.13", "local"), "192.0.2.14": legacy})
	if err != nil {
		t.Fatal(err)
	}
	var vips []string
	for v := range got {
		vips = append(vips, v.String())
	}
	if !slices.Equal(vips, []string{"192.0.2.10"}) || len(entries) != 1 {
		t.Fatalf("announced %v, want only 192.0.2.10", vips)
	}
}
