package service

import (
	"net/netip"
	"testing"

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
