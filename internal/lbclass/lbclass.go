// Package lbclass decides which Services vip-allocator serves. The operator
// (which allocates) and the agent (which forwards) must decide alike, so both
// call Handles.
package lbclass

import (
	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Handles reports whether svc is ours: a LoadBalancer of our class
// (paasv1.LoadBalancerClass), or of no class unless ownClassOnly (set to
// coexist with another implementation).
func Handles(svc *corev1.Service, ownClassOnly bool) bool {
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
		return false
	}
	if svc.Spec.LoadBalancerClass == nil {
		return !ownClassOnly
	}
	return *svc.Spec.LoadBalancerClass == paasv1.LoadBalancerClass
}
