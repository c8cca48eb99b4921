package trust

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// TestLedgerHolders: spec.owner and, for a shared address, spec.sharedWith,
// each with a uid, give an address to Services; nothing else does.
func TestLedgerHolders(t *testing.T) {
	for _, tc := range []struct {
		desc string
		ip   *paasv1.IP
		want []types.UID
	}{
		{desc: "none", ip: nil},
		{desc: "no owner (legacy or the original operator's, not adopted yet)", ip: &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Annotations: map[string]string{paasv1.OwnerAnnotation: "ns/web"}}}},
		{desc: "owner without uid", ip: &paasv1.IP{Spec: paasv1.IPSpec{Owner: &paasv1.IPOwner{Namespace: "ns", Name: "web"}}}},
		{desc: "owner", ip: &paasv1.IP{Spec: paasv1.IPSpec{Owner: &paasv1.IPOwner{Namespace: "ns", Name: "web", UID: "u"}}}, want: []types.UID{"u"}},
		{desc: "shared", ip: &paasv1.IP{Spec: paasv1.IPSpec{Owner: &paasv1.IPOwner{Namespace: "ns", Name: "tcp", UID: "u1"}, SharingKey: "dns",
			SharedWith: []paasv1.IPOwner{{Namespace: "ns", Name: "udp", UID: "u2"}, {Namespace: "ns", Name: "nouid"}}}}, want: []types.UID{"u1", "u2"}},
		{desc: "sharedWith without an owner names nobody", ip: &paasv1.IP{Spec: paasv1.IPSpec{SharedWith: []paasv1.IPOwner{{Namespace: "ns", Name: "udp", UID: "u2"}}}}},
	} {
		if got := ledgerHolders(tc.ip); !slices.Equal(got, tc.want) {
			t.Errorf("%s: %q", tc.desc, got)
		}
	}
}

// TestNodeAddresses: every address a Node reports, whatever its type; names skipped.
func TestNodeAddresses(t *testing.T) {
	nodes := []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeInternalIP, Address: "192.0.2.251"}, {Type: corev1.NodeExternalIP, Address: "203.0.113.5"},
		{Type: corev1.NodeInternalIP, Address: "2001:db8::251"}, {Type: corev1.NodeHostName, Address: "n1"}}}}}
	got := NodeAddresses(nodes, nil)
	if len(got) != 3 || got[netip.MustParseAddr("203.0.113.5")] != "n1" || got[netip.MustParseAddr("2001:db8::251")] != "n1" {
		t.Fatalf("%v", got)
	}
}
