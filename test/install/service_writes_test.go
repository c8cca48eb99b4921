//go:build envtest

package install

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// ofClass sets a Service's class (none when empty).
func ofClass(class string) func(*corev1.Service) {
	return func(s *corev1.Service) {
		if class != "" {
			s.Spec.LoadBalancerClass = ptr.To(class)
		}
	}
}

// patchService patches Service name (its status when status is set) as c with
// a merge patch of what mutate changes; refusal "" means it must succeed.
func patchService(t *testing.T, c client.Client, name string, status bool, mutate func(*corev1.Service), refusal string) {
	t.Helper()
	svc := &corev1.Service{}
	testenv.Must(t, c.Get(context.Background(), types.NamespacedName{Namespace: "default", Name: name}, svc))
	patch := client.MergeFrom(svc.DeepCopy())
	mutate(svc)
	if status {
		checkRefusal(t, c.Status().Patch(context.Background(), svc, patch), refusal)
		return
	}
	checkRefusal(t, c.Patch(context.Background(), svc, patch), refusal)
}

func condition(typ, reason string) metav1.Condition {
	return metav1.Condition{Type: typ, Status: metav1.ConditionFalse, Reason: reason, Message: "m", LastTransitionTime: metav1.Now()}
}

// testAgentServiceStatus: an agent's Pod-bound token writes its condition
// vip.paas.org/Programmed on a Service and nothing else of its status, whatever
// the Service's class: another implementation's Services included, which the
// ingress policy leaves to that implementation.
func testAgentServiceStatus(t *testing.T, admin, agent client.Client) {
	ctx := context.Background()
	for _, tc := range []struct{ name, class string }{
		{"agent-status-no-class", ""}, {"agent-status-ours", paasv1.LoadBalancerClass}, {"agent-status-foreign", "example.com/other-lb"},
	} {
		name := tc.name
		testenv.Must(t, admin.Create(ctx, testenv.LoadBalancerService("default", name, ofClass(tc.class))))
		t.Run(fmt.Sprintf("class %q", tc.class), func(t *testing.T) {
			patchService(t, agent, name, true, func(s *corev1.Service) {
				s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.66", IPMode: ptr.To(corev1.LoadBalancerIPModeVIP)}}
			}, "is written by the vip-allocator operator only (not "+agentUser)
			patchService(t, agent, name, true, func(s *corev1.Service) {
				s.Status.Conditions = append(s.Status.Conditions, condition("vip.paas.org/Announced", "Forged"))
			}, "write only the condition vip.paas.org/Programmed")
			patchService(t, agent, name, true, func(s *corev1.Service) {
				s.Status.Conditions = append(s.Status.Conditions, condition(paasv1.ConditionProgrammed, paasv1.ReasonNotInLedger))
			}, "")
		})
	}
	// The foreign class's own controller (here an admin) still writes its addresses.
	patchService(t, admin, "agent-status-foreign", true, func(s *corev1.Service) {
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
	}, "")
}

// testOperatorServiceWrites: the operator's own token patches a Service only
// for the cleanup finalizer, to drop the original operator's finalizer and, as a migration does, to make
// it a LoadBalancer asking for an address; its status stays writable, and its
// selector, ports, labels and other finalizers are out of reach.
func testOperatorServiceWrites(t *testing.T, admin, operator client.Client) {
	ctx := context.Background()
	web := testenv.LoadBalancerService("default", "operator-web")
	web.Finalizers = []string{paasv1.OriginalServiceFinalizer, "example.com/keep"}
	testenv.Must(t, admin.Create(ctx, web))
	legacy := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "operator-legacy"},
		Spec: corev1.ServiceSpec{Selector: map[string]string{"app": "legacy"},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}}}}
	testenv.Must(t, admin.Create(ctx, legacy))
	t.Cleanup(func() {
		for _, n := range []string{web.Name, legacy.Name} {
			patchService(t, admin, n, false, func(s *corev1.Service) { s.Finalizers = nil }, "")
		}
	})
	for _, tc := range []struct {
		desc, name string
		status     bool
		mutate     func(*corev1.Service)
		refusal    string
	}{
		{"its selector", web.Name, false, func(s *corev1.Service) { s.Spec.Selector = map[string]string{"app": "attacker"} }, "never changes the selector, ports"},
		{"its target port", web.Name, false, func(s *corev1.Service) { s.Spec.Ports[0].TargetPort = intstr.FromInt32(22) }, "never changes the selector, ports"},
		{"a new port", web.Name, false, func(s *corev1.Service) {
			s.Spec.Ports = append(s.Spec.Ports, corev1.ServicePort{Name: "ssh", Port: 22})
		}, "never changes the selector, ports"},
		{"its external IPs", web.Name, false, func(s *corev1.Service) { s.Spec.ExternalIPs = []string{"192.0.2.9"} }, "never changes the selector, ports"},
		{"its labels", web.Name, false, func(s *corev1.Service) { s.Labels = map[string]string{"exposed": "yes"} }, "no labels, annotations or owners"},
		{"another finalizer", web.Name, false, func(s *corev1.Service) { s.Finalizers = []string{paasv1.OriginalServiceFinalizer} }, "changes no other finalizer"},
		{"a finalizer of its own", web.Name, false, func(s *corev1.Service) { s.Finalizers = append(s.Finalizers, "example.com/hold") }, "changes no other finalizer"},
		{"a LoadBalancer made ClusterIP", web.Name, false, func(s *corev1.Service) {
			s.Spec.Type = corev1.ServiceTypeClusterIP
			s.Spec.AllocateLoadBalancerNodePorts, s.Spec.ExternalTrafficPolicy = nil, ""
			for i := range s.Spec.Ports {
				s.Spec.Ports[i].NodePort = 0
			}
		}, "only to make it a LoadBalancer"},
		{"a conversion to another class", legacy.Name, false, func(s *corev1.Service) {
			s.Spec.Type, s.Spec.LoadBalancerClass = corev1.ServiceTypeLoadBalancer, ptr.To("example.com/other-lb")
		}, "only to make it a LoadBalancer"},
		{"a conversion that moves the selector", legacy.Name, false, func(s *corev1.Service) {
			s.Spec.Type, s.Spec.Selector = corev1.ServiceTypeLoadBalancer, map[string]string{"app": "attacker"}
		}, "never changes the selector, ports"},
		// What it does write.
		{"the status (an address and a condition)", web.Name, true, func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10", IPMode: ptr.To(corev1.LoadBalancerIPModeProxy)}}
			s.Status.Conditions = []metav1.Condition{condition(paasv1.ConditionAddressConflict, "Reserved")}
		}, ""},
		{"dropping the original's finalizer", web.Name, false, func(s *corev1.Service) { s.Finalizers = []string{"example.com/keep"} }, ""},
		{"adding the cleanup finalizer", web.Name, false, func(s *corev1.Service) { s.Finalizers = append(s.Finalizers, service.CleanupFinalizer) }, ""},
		{"removing the cleanup finalizer", web.Name, false, func(s *corev1.Service) { s.Finalizers = []string{"example.com/keep"} }, ""},
		{"a migration's conversion", legacy.Name, false, func(s *corev1.Service) {
			s.Spec.Type, s.Spec.LoadBalancerIP = corev1.ServiceTypeLoadBalancer, "192.0.2.20"
		}, ""},
		{"a migration's release of spec.loadBalancerIP", legacy.Name, false, func(s *corev1.Service) { s.Spec.LoadBalancerIP = "" }, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) { patchService(t, operator, tc.name, tc.status, tc.mutate, tc.refusal) })
	}
	got := &corev1.Service{}
	testenv.Must(t, admin.Get(ctx, client.ObjectKeyFromObject(web), got))
	if got.Spec.Selector["app"] != "operator-web" || len(got.Spec.Ports) != 1 || got.Spec.Ports[0].TargetPort.IntValue() != 8080 {
		t.Errorf("Service %s changed: %+v", web.Name, got.Spec)
	}
	if fmt.Sprint(got.Finalizers) != "[example.com/keep]" {
		t.Errorf("finalizers of %s: %v, want only example.com/keep", web.Name, got.Finalizers)
	}
}
