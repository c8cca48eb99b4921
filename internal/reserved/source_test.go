package reserved

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestReservationsChanged(t *testing.T) {
	base := &corev1.Node{}
	base.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}}
	for _, tc := range []struct {
		desc string
		edit func(*corev1.Node)
		want bool
	}{
		{"a heartbeat", func(n *corev1.Node) {
			n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
		}, false},
		{"a label", func(n *corev1.Node) { n.Labels = map[string]string{"a": "b"} }, false},
		{"an address", func(n *corev1.Node) { n.Status.Addresses[0].Address = "192.0.2.2" }, true},
		{"pod CIDRs", func(n *corev1.Node) { n.Spec.PodCIDRs = []string{"10.244.0.0/24"} }, true},
		{"published interfaces", func(n *corev1.Node) {
			n.Annotations = map[string]string{paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","addrs":["192.0.2.1/24"]}]`}
		}, true},
	} {
		cur := base.DeepCopy()
		tc.edit(cur)
		if got := Changed(base, cur); got != tc.want {
			t.Errorf("%s: changed=%v, want %v", tc.desc, got, tc.want)
		}
	}
}
