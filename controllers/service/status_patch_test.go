package service

import (
	"encoding/json"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// statusPatch must send exactly what client.MergeFrom would for a change of
// the status only.
func TestStatusPatchIsMergeFromsPatch(t *testing.T) {
	base := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", ResourceVersion: "7", Labels: map[string]string{"app": "web"}},
		Spec:       corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Port: 80}}},
		Status: corev1.ServiceStatus{Conditions: []metav1.Condition{
			{Type: "vip.paas.org/Programmed", Status: metav1.ConditionTrue, Reason: "Programmed", LastTransitionTime: metav1.Unix(10, 0)}}},
	}
	proxy := corev1.LoadBalancerIPModeProxy
	allocated := metav1.Condition{Type: "vip.paas.org/IPAllocated", Status: metav1.ConditionTrue, Reason: "Allocated", Message: "203.0.113.7 from IPGroup lan", LastTransitionTime: metav1.Unix(20, 0)}
	for _, tc := range []struct {
		desc           string
		before, change func(*corev1.Service)
	}{
		{"an address and a condition added", nil, func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7", IPMode: &proxy}}
			s.Status.Conditions = append(s.Status.Conditions, allocated)
		}},
		{"the addresses removed", func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7", IPMode: &proxy}}
		}, func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = nil
		}},
		{"a condition's message changed", nil, func(s *corev1.Service) {
			s.Status.Conditions[0].Message = "now with a message"
		}},
		{"the conditions removed", nil, func(s *corev1.Service) {
			s.Status.Conditions = nil
		}},
		{"the conditions emptied (an empty list, not nil)", nil, func(s *corev1.Service) {
			s.Status.Conditions = []metav1.Condition{}
		}},
		{"the address moved, a condition added, the other kept", func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7", IPMode: &proxy}, {IP: "2001:db8::7", IPMode: &proxy}}
		}, func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress[0].IP = "203.0.113.8"
			s.Status.Conditions = append(s.Status.Conditions, allocated)
		}},
		{"only the ingress's IP mode changed", func(s *corev1.Service) {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "203.0.113.7", IPMode: &proxy}}
		}, func(s *corev1.Service) {
			vip := corev1.LoadBalancerIPModeVIP
			s.Status.LoadBalancer.Ingress[0].IPMode = &vip
		}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			old := base.DeepCopy()
			if tc.before != nil {
				tc.before(old)
			}
			desired := old.DeepCopy()
			tc.change(desired)
			want, err := client.MergeFrom(old).Data(desired)
			if err != nil {
				t.Fatal(err)
			}
			p, err := statusPatch(old, desired)
			if err != nil {
				t.Fatal(err)
			}
			got, err := p.Data(desired)
			if err != nil {
				t.Fatal(err)
			}
			var w, g any
			if err := json.Unmarshal(want, &w); err != nil {
				t.Fatal(err)
			}
			if err := json.Unmarshal(got, &g); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(w, g) {
				t.Fatalf("statusPatch sends %s, MergeFrom %s", got, want)
			}
		})
	}
}
