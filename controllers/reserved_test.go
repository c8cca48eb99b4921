package controllers

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

func TestAddressConflictCondition(t *testing.T) {
	a1, a2 := netip.MustParseAddr("192.0.2.20"), netip.MustParseAddr("2001:db8::20")
	node := allocator.Reservation{Holder: "the address of Node n1", Kind: paasv1.ReasonReservedByNode}
	pods := allocator.Reservation{Holder: "in the pod CIDR 2001:db8::/112 of Node n2", Kind: paasv1.ReasonReservedByPodCIDR}
	if _, ok := addressConflictCondition(3, nil); ok {
		t.Fatal("a Service holding no reserved address has no conflict condition")
	}
	c, ok := addressConflictCondition(3, map[netip.Addr]allocator.Reservation{a2: pods, a1: node})
	want := metav1.Condition{Type: paasv1.ConditionAddressConflict, Status: metav1.ConditionTrue, ObservedGeneration: 3, Reason: paasv1.ReasonReservedByNode,
		Message: "192.0.2.20 is the address of Node n1; 2001:db8::20 is in the pod CIDR 2001:db8::/112 of Node n2: the Service keeps the address but no node programs or announces it; free the address there, or exclude it from the IPGroup to move the Service to another one"}
	if !ok || c != want {
		t.Fatalf("got %+v, want %+v", c, want)
	}
	var conds []metav1.Condition
	setAddressConflict(&conds, 3, map[netip.Addr]allocator.Reservation{a1: node})
	if len(conds) != 1 {
		t.Fatalf("conditions %v", conds)
	}
	setAddressConflict(&conds, 3, nil)
	if len(conds) != 0 {
		t.Fatalf("a resolved conflict leaves %v", conds)
	}
}

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
		if got := reservationsChanged(base, cur); got != tc.want {
			t.Errorf("%s: changed=%v, want %v", tc.desc, got, tc.want)
		}
	}
}

func TestSetCapacityLeavesReservedOut(t *testing.T) {
	g, err := allocator.NewGroup(allocator.Group{Name: "lan", Segment: netip.MustParsePrefix("192.0.2.0/28"), L2: true})
	if err != nil {
		t.Fatal(err)
	}
	rs := []allocator.Reservation{
		{Prefix: netip.MustParsePrefix("192.0.2.1/32")},                // a node
		{Prefix: netip.MustParsePrefix("192.0.2.4/31")},                // a pod CIDR, one address held (a conflict)
		{Prefix: netip.MustParsePrefix("192.0.2.15/32"), L2Only: true}, // a subnet's broadcast
	}
	held := []netip.Addr{netip.MustParseAddr("192.0.2.5"), netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("198.51.100.1")}
	var st paasv1.IPGroupStatus
	setCapacity(&st, g, ledgerCounts{held: held}, rs)
	if st.Capacity != "16" || st.Allocated != 2 || st.Reserved != "4" || st.Available != "11" {
		t.Fatalf("capacity %s allocated %d reserved %s available %s, want 16 2 4 11", st.Capacity, st.Allocated, st.Reserved, st.Available)
	}
	// Records of hosts on the LAN using an address: neither allocated nor
	// available; one on a reserved address is counted there once.
	setCapacity(&st, g, ledgerCounts{held: held, records: []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.1")}, inUseOnLAN: 2}, rs)
	if st.Allocated != 2 || st.Reserved != "4" || st.Available != "10" || st.InUseOnLAN != 2 {
		t.Fatalf("allocated %d reserved %s available %s in use on the LAN %d, want 2 4 10 2", st.Allocated, st.Reserved, st.Available, st.InUseOnLAN)
	}
}
