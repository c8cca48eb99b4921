package lbclass

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestHandles(t *testing.T) {
	ours, other := paasv1.LoadBalancerClass, "example.com/lb"
	for _, tc := range []struct {
		desc         string
		typ          corev1.ServiceType
		class        *string
		ownClassOnly bool
		want         bool
	}{
		{"LoadBalancer without class", corev1.ServiceTypeLoadBalancer, nil, false, true},
		{"LoadBalancer with our class", corev1.ServiceTypeLoadBalancer, &ours, false, true},
		{"LoadBalancer with another class", corev1.ServiceTypeLoadBalancer, &other, false, false},
		{"ClusterIP", corev1.ServiceTypeClusterIP, nil, false, false},
		{"own class only: no class", corev1.ServiceTypeLoadBalancer, nil, true, false},
		{"own class only: our class", corev1.ServiceTypeLoadBalancer, &ours, true, true},
	} {
		svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: tc.typ, LoadBalancerClass: tc.class}}
		if got := Handles(svc, tc.ownClassOnly); got != tc.want {
			t.Errorf("%s: handles = %v, want %v", tc.desc, got, tc.want)
		}
	}
}
