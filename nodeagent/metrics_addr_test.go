package nodeagent

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The metrics port listens on the node's InternalIP unless told otherwise,
// never on every interface by default.
func TestMetricsBindAddress(t *testing.T) {
	node := func(addrs ...corev1.NodeAddress) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Status: corev1.NodeStatus{Addresses: addrs}}
	}
	for _, tc := range []struct {
		name, flag string
		node       *corev1.Node
		want       string
		wantErr    bool
	}{
		{"the InternalIP", "", node(corev1.NodeAddress{Type: corev1.NodeExternalIP, Address: "203.0.113.7"}, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}), "10.0.0.5:9478", false},
		{"an IPv6 InternalIP", "", node(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "2001:db8::5"}), "[2001:db8::5]:9478", false},
		{"the first of two", "", node(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "2001:db8::5"}), "10.0.0.5:9478", false},
		{"no InternalIP: refused, not every interface", "", node(corev1.NodeAddress{Type: corev1.NodeHostName, Address: "n1"}), "", true},
		{"the flag wins", ":9478", node(corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "10.0.0.5"}), ":9478", false},
		{"disabled", "0", node(), "0", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, err := MetricsBindAddress(tc.flag, tc.node)
			if got != tc.want || (err != nil) != tc.wantErr {
				t.Fatalf("MetricsBindAddress = %q, %v; want %q (error %v)", got, err, tc.want, tc.wantErr)
			}
		})
	}
}
