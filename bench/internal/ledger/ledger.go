// Package ledger builds the IP ledger object the operator writes for a Service,
// for benchmarks whose baselines make the operator's writes themselves.
package ledger

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Object is the ledger object of addr held by svc, from IPGroup group, as the operator writes it.
func Object(svc *corev1.Service, addr netip.Addr, group string) *paasv1.IP {
	return &paasv1.IP{
		ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(addr),
			Labels:      map[string]string{paasv1.IPGroupLabel: group},
			Annotations: map[string]string{paasv1.OwnerAnnotation: svc.Namespace + "/" + svc.Name}},
		Spec: paasv1.IPSpec{Address: addr.String(), IPGroup: group,
			Owner: &paasv1.IPOwner{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}},
	}
}
