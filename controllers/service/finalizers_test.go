package service

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestCleanupIsOurs(t *testing.T) {
	lb, clusterIP := corev1.ServiceTypeLoadBalancer, corev1.ServiceTypeClusterIP
	for _, tc := range []struct {
		desc         string
		typ          corev1.ServiceType
		class        *string
		ownClassOnly bool
		held         bool
		want         bool
	}{
		{"it held addresses here", clusterIP, nil, true, true, true},
		{"a LoadBalancer of no class, every classless one ours", lb, nil, false, false, true},
		{"a LoadBalancer of our class", lb, ptr.To(paasv1.LoadBalancerClass), true, false, true},
		{"a LoadBalancer of another class", lb, ptr.To("example.com/cloud"), false, false, false},
		{"a LoadBalancer of no class beside another implementation", lb, nil, true, false, false},
		{"no longer a LoadBalancer, every classless one ours", clusterIP, nil, false, false, true},
		{"no longer a LoadBalancer, beside another implementation, held nothing", clusterIP, nil, true, false, false},
	} {
		svc := &corev1.Service{Spec: corev1.ServiceSpec{Type: tc.typ, LoadBalancerClass: tc.class}}
		if got := cleanupIsOurs(svc, tc.ownClassOnly, tc.held); got != tc.want {
			t.Errorf("%s: cleanupIsOurs = %v, want %v", tc.desc, got, tc.want)
		}
	}
}
