package service

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

// reasonOf maps an allocation error to its condition reason; of joined errors
// (one per family), the first one's.
func reasonOf(err error) string {
	if joined, ok := err.(interface{ Unwrap() []error }); ok && len(joined.Unwrap()) > 0 {
		err = joined.Unwrap()[0]
	}
	for _, r := range []struct {
		sentinel error
		reason   string
	}{
		{allocator.ErrNoGroup, paasv1.ReasonNoIPGroup},
		{allocator.ErrGroupFull, paasv1.ReasonIPGroupFull},
		{allocator.ErrInUse, paasv1.ReasonRequestedIPInUse},
		{allocator.ErrExcluded, paasv1.ReasonRequestedIPExcluded},
		{allocator.ErrOutsideGroups, paasv1.ReasonRequestedIPOutsideGroups},
		{allocator.ErrGroupNotAllowed, paasv1.ReasonGroupNotAllowed},
		{allocator.ErrReserved, paasv1.ReasonRequestedIPReserved},
		{allocator.ErrLeased, paasv1.ReasonRequestedIPLeased},
		{allocator.ErrInUseOnLAN, paasv1.ReasonRequestedIPInUseOnLAN},
		{allocator.ErrSharedPortCollision, paasv1.ReasonSharedPortCollision},
		{allocator.ErrSharedEndpointsDiffer, paasv1.ReasonSharedEndpointsDiffer},
		{allocator.ErrSharedIPFull, paasv1.ReasonSharedIPFull},
		{allocator.ErrSharedTooManyPorts, paasv1.ReasonSharedTooManyPorts},
	} {
		if errors.Is(err, r.sentinel) {
			return r.reason
		}
	}
	return paasv1.ReasonInvalidRequest
}

// ipAllocatedCondition computes the condition from what the Service holds and the
// allocation error, if any. A PreferDualStack Service that got one family is
// served, and the message says why the other is missing; RequireDualStack is not.
func ipAllocatedCondition(svc *corev1.Service, held []netip.Addr, groupOf func(netip.Addr) string, err error) metav1.Condition {
	c := metav1.Condition{Type: paasv1.ConditionIPAllocated, ObservedGeneration: svc.Generation}
	var parts []string
	for _, addr := range held {
		if g := groupOf(addr); g != "" {
			parts = append(parts, fmt.Sprintf("%s from IPGroup %s", addr, g))
		} else {
			parts = append(parts, addr.String())
		}
	}
	partialOK := len(held) > 0 && !requiresDualStack(svc)
	switch {
	case err == nil:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, paasv1.ReasonAllocated, "holds "+strings.Join(parts, ", ")
	case partialOK && !hasRequestError(err):
		c.Status, c.Reason = metav1.ConditionTrue, paasv1.ReasonAllocated
		c.Message = fmt.Sprintf("holds %s; other family: %s", strings.Join(parts, ", "), oneLine(err))
	case requiresDualStack(svc) && len(held) == 1 && !hasRequestError(err):
		got := allocator.FamilyOf(held[0])
		c.Status, c.Reason = metav1.ConditionFalse, reasonOf(err)
		c.Message = fmt.Sprintf("ipFamilyPolicy RequireDualStack needs an IPv4 and an IPv6 address, and only %s was allocated: %s; or set ipFamilyPolicy PreferDualStack to be served by %s alone (keeps %s meanwhile)",
			got, oneLine(err), got, strings.Join(parts, ", "))
	default:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, reasonOf(err), oneLine(err)
		if len(held) > 0 {
			c.Message += fmt.Sprintf(" (keeps %s meanwhile)", strings.Join(parts, ", "))
		}
	}
	return c
}

func requiresDualStack(svc *corev1.Service) bool {
	return svc.Spec.IPFamilyPolicy != nil && *svc.Spec.IPFamilyPolicy == corev1.IPFamilyPolicyRequireDualStack
}

// hasRequestError is true when the Service asked for something it cannot get,
// or holds an address its groups no longer allow and cannot move: then it must
// hear about it even while it holds addresses.
func hasRequestError(err error) bool {
	for _, s := range []error{allocator.ErrInUse, allocator.ErrExcluded, allocator.ErrOutsideGroups, allocator.ErrGroupNotAllowed, allocator.ErrFamilyNotAllowed,
		allocator.ErrReserved, allocator.ErrLeased, allocator.ErrInUseOnLAN, allocator.ErrCannotRelocate, allocator.ErrSharedPortCollision, allocator.ErrSharedEndpointsDiffer, allocator.ErrSharedIPFull,
		allocator.ErrSharedTooManyPorts} {
		if errors.Is(err, s) {
			return true
		}
	}
	return false
}

// oneLine joins the per-family messages of a joined error.
func oneLine(err error) string { return strings.ReplaceAll(err.Error(), "\n", "; ") }

// ingressFor is the status.loadBalancer.ingress for held. With ipMode Proxy
// kube-proxy leaves the VIP to the node agent; with VIP, kube-proxy (or the CNI)
// handles it and the agent programs nothing for it.
func ingressFor(held []netip.Addr, mode corev1.LoadBalancerIPMode) []corev1.LoadBalancerIngress {
	var out []corev1.LoadBalancerIngress
	for _, addr := range held {
		out = append(out, corev1.LoadBalancerIngress{IP: addr.String(), IPMode: &mode})
	}
	return out
}

// setKept turns an Allocated condition into AddressKept when the Service
// keeps addresses its groups no longer allow (kept, each with the group that
// protects it): it is served, and told what lets the address go.
func setKept(c *metav1.Condition, kept map[netip.Addr]string) {
	if len(kept) == 0 || c.Reason != paasv1.ReasonAllocated {
		return
	}
	addrs := slices.SortedFunc(maps.Keys(kept), func(a, b netip.Addr) int { return a.Compare(b) })
	var parts []string
	for _, addr := range addrs {
		parts = append(parts, fmt.Sprintf("%s, which IPGroup %s no longer allows (excluded, outside its segment or addresses, or the group is being deleted)", addr, kept[addr]))
	}
	c.Reason = paasv1.ReasonAddressKept
	c.Message = fmt.Sprintf("%s; keeps %s until the group's admin sets %s=true on it, or the Service asks for another address",
		c.Message, strings.Join(parts, "; "), paasv1.ReleaseAddressesAnnotation)
}
