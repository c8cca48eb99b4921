package service

import (
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Which ledger objects naming a Service are its own, the original operator's (to
// be owned), or garbage.
func TestClassifyLedger(t *testing.T) {
	original := func(name string) paasv1.IP { // as the original's Service controller writes it
		return paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{paasv1.IPGroupLabel: "g"},
			Annotations: map[string]string{paasv1.OwnerAnnotation: "shop/api"}}}
	}
	ours := func(name, uid string) paasv1.IP {
		ip := original(name)
		ip.Spec.Owner = &paasv1.IPOwner{Namespace: "shop", Name: "api", UID: types.UID("uid-" + uid)}
		return ip
	}
	svc := func(ingress ...string) *corev1.Service {
		s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api", UID: "uid-now"}}
		for _, ip := range ingress {
			s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
		}
		return s
	}
	for _, c := range []struct {
		desc                     string
		svc                      *corev1.Service
		ledger                   []paasv1.IP
		inFlight                 []string
		current, original, stale []string
	}{
		{desc: "the original's object for the address in the status is owned",
			svc: svc("192.0.2.2"), ledger: []paasv1.IP{original("192.0.2.2")}, original: []string{"192.0.2.2"}},
		{desc: "status empty: the original crashed between ledger and status, the object is owned",
			svc: svc(), ledger: []paasv1.IP{original("192.0.2.2")}, original: []string{"192.0.2.2"}},
		{desc: "the original's object for an address the status no longer shows is garbage",
			svc: svc("192.0.2.3"), ledger: []paasv1.IP{original("192.0.2.2"), ours("192.0.2.3", "now")},
			current: []string{"192.0.2.3"}, stale: []string{"192.0.2.2"}},
		{desc: "ours, of this Service and of an earlier one of the same name",
			svc: svc("192.0.2.2"), ledger: []paasv1.IP{ours("192.0.2.2", "now"), ours("192.0.2.9", "before")},
			current: []string{"192.0.2.2"}, stale: []string{"192.0.2.9"}},
		{desc: "owned by the last reconcile, the cache still shows the original's: not owned twice",
			svc: svc("192.0.2.2"), ledger: []paasv1.IP{original("192.0.2.2")}, inFlight: []string{"192.0.2.2"}, current: []string{"192.0.2.2"}},
	} {
		current, original, stale := classifyLedger(c.svc, c.ledger, func(name string) bool { return slices.Contains(c.inFlight, name) })
		for _, got := range []struct {
			what string
			ips  []paasv1.IP
			want []string
		}{{"current", current, c.current}, {"original", original, c.original}, {"stale", stale, c.stale}} {
			var names []string
			for _, ip := range got.ips {
				names = append(names, ip.Name)
			}
			if !slices.Equal(names, got.want) {
				t.Errorf("%s: %s = %v, want %v", c.desc, got.what, names, got.want)
			}
		}
	}
}

func TestWebhookHint(t *testing.T) {
	for _, c := range []struct {
		err  error
		want bool
	}{
		{errors.New(`Internal error occurred: failed calling webhook "vip.kb.io": failed to call webhook: Post "https://vip-allocator-operator-webhook.vip-allocator-operator.svc:443/validate-paas-org-v1-ip?timeout=10s": no endpoints available`), true},
		{errors.New(`ips.paas.org "192.0.2.2" is forbidden: ValidatingAdmissionPolicy 'vip-allocator-ip-ledger-writers' denied request`), false},
		{nil, false},
	} {
		if got := webhookHint(c.err); (got != "") != c.want || (c.want && !strings.Contains(got, "vip-allocator migrate upgrade")) {
			t.Errorf("webhookHint(%v) = %q", c.err, got)
		}
	}
}
