package service

import (
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus/testutil"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestServiceStateMetrics(t *testing.T) {
	now := time.Date(2026, 1, 1, 12, 0, 0, 0, time.UTC)
	ago := func(d time.Duration) metav1.Time { return metav1.NewTime(now.Add(-d)) }
	svc := func(name string, class *string, conds ...metav1.Condition) *corev1.Service {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "ns"},
			Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class},
			Status: corev1.ServiceStatus{Conditions: conds}}
	}
	cond := func(typ string, status metav1.ConditionStatus, reason string, since time.Duration) metav1.Condition {
		return metav1.Condition{Type: typ, Status: status, Reason: reason, LastTransitionTime: ago(since)}
	}
	objs := []client.Object{
		svc("full-a", nil, cond(paasv1.ConditionIPAllocated, metav1.ConditionFalse, paasv1.ReasonIPGroupFull, 20*time.Minute)),
		svc("full-b", nil, cond(paasv1.ConditionIPAllocated, metav1.ConditionFalse, paasv1.ReasonIPGroupFull, 2*time.Minute)),
		svc("nogroup", ptr.To(paasv1.LoadBalancerClass), cond(paasv1.ConditionIPAllocated, metav1.ConditionFalse, paasv1.ReasonNoIPGroup, time.Minute)),
		svc("served", nil, cond(paasv1.ConditionIPAllocated, metav1.ConditionTrue, paasv1.ReasonAllocated, time.Hour),
			cond(paasv1.ConditionAnnounced, metav1.ConditionTrue, paasv1.ReasonAnnounced, time.Hour)),
		svc("silent", nil, cond(paasv1.ConditionIPAllocated, metav1.ConditionTrue, paasv1.ReasonAllocated, time.Hour),
			cond(paasv1.ConditionAnnounced, metav1.ConditionFalse, paasv1.ReasonNoAnnouncer, 7*time.Minute)),
		svc("other-class", ptr.To("example.com/lb"), cond(paasv1.ConditionIPAllocated, metav1.ConditionFalse, paasv1.ReasonIPGroupFull, time.Hour)),
	}
	reader := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).WithObjects(objs...).Build()
	leading := make(chan struct{})
	c := &serviceStateCollector{now: func() time.Time { return now }}

	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("without a source: %d series, want none", n)
	}
	c.source.Store(&serviceStateSource{reader: reader, leading: leading})
	if n := testutil.CollectAndCount(c); n != 0 {
		t.Errorf("not leading: %d series, want none", n)
	}
	close(leading)
	want := `
# HELP vip_allocator_services_pending Services the operator serves whose condition vip.paas.org/IPAllocated is False, by reason.
# TYPE vip_allocator_services_pending gauge
vip_allocator_services_pending{reason="IPGroupFull"} 2
vip_allocator_services_pending{reason="NoIPGroup"} 1
# HELP vip_allocator_services_pending_seconds How long the Service pending longest (IPAllocated False) has been pending, by reason.
# TYPE vip_allocator_services_pending_seconds gauge
vip_allocator_services_pending_seconds{reason="IPGroupFull"} 1200
vip_allocator_services_pending_seconds{reason="NoIPGroup"} 60
# HELP vip_allocator_services_unannounced Services holding an address no node announces (condition vip.paas.org/Announced False).
# TYPE vip_allocator_services_unannounced gauge
vip_allocator_services_unannounced 1
# HELP vip_allocator_services_unannounced_seconds How long the Service unannounced longest (Announced False) has been so.
# TYPE vip_allocator_services_unannounced_seconds gauge
vip_allocator_services_unannounced_seconds 420
`
	if err := testutil.CollectAndCompare(c, strings.NewReader(want)); err != nil {
		t.Error(err)
	}

	// With --own-class-only, a Service of no class is not ours.
	c.source.Store(&serviceStateSource{reader: reader, leading: leading, ownClassOnly: true})
	if err := testutil.CollectAndCompare(c, strings.NewReader(`
# HELP vip_allocator_services_pending Services the operator serves whose condition vip.paas.org/IPAllocated is False, by reason.
# TYPE vip_allocator_services_pending gauge
vip_allocator_services_pending{reason="NoIPGroup"} 1
`), "vip_allocator_services_pending"); err != nil {
		t.Error(err)
	}
}
