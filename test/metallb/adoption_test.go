//go:build envtest

package metallb

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/operatortest"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestAdoptsStatusAddresses: Services whose status another load balancer wrote (here MetalLB's
// controller, on one-part pools, so the converted IPGroups are plain segments) keep their
// addresses when the operator takes over, with ledger objects created for them; a Service
// whose address no converted group allows (its pool was not converted) is given a free one,
// and an AddressNotAdopted Event says which address it lost and why. MetalLB's annotations
// steer the operator as they steered MetalLB.
func TestAdoptsStatusAddresses(t *testing.T) {
	env := startEnv(t)
	ctx := context.Background()
	restore := withoutStatusPolicy(ctx, t, env.Admin)
	ctl := startMetalLB(ctx, t, env)
	if err := env.ApplyYAML(ctx, []byte(`
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lan, namespace: metallb-system}
spec: {addresses: [192.0.2.0/27]}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: pinned, namespace: metallb-system}
spec: {addresses: [198.51.100.0/28], autoAssign: false}
---
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: dropped, namespace: metallb-system}
spec: {addresses: [203.0.113.0/28], serviceAllocation: {priority: 1, namespaces: [legacy]}}
`)); err != nil {
		t.Fatal(err)
	}
	for _, ns := range []string{"app", "legacy"} {
		if err := env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			t.Fatal(err)
		}
	}
	svcs := []service{
		{namespace: "app", name: "auto", want: []string{"192.0.2.0"}},
		{namespace: "app", name: "requested", annotations: map[string]string{"metallb.io/loadBalancerIPs": "192.0.2.20"}, want: []string{"192.0.2.20"}},
		{namespace: "app", name: "pinned", annotations: map[string]string{"metallb.universe.tf/address-pool": "pinned"}, want: []string{"198.51.100.0"}},
		{namespace: "legacy", name: "orphan", want: []string{"203.0.113.0"}},
	}
	for _, s := range svcs {
		if err := env.Admin.Create(ctx, s.object()); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 60*time.Second, func() (bool, string) {
			svc := &corev1.Service{}
			if err := env.Admin.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, svc); err != nil {
				return false, err.Error()
			}
			return strings.Join(ingressIPs(svc), ",") == strings.Join(s.want, ","), s.name + " shows " + strings.Join(ingressIPs(svc), ",")
		})
	}
	ctl.Stop()
	restore()

	// What "migrate metallb apply" would create for lan and pinned; the pool "dropped" is left
	// out, as when a person does not convert it.
	for _, g := range []*paasv1.IPGroup{
		{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/27"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "pinned"}, Spec: paasv1.IPGroupSpec{Segment: "198.51.100.0/28", AutoAssign: new(bool)}},
	} {
		if err := env.Admin.Create(ctx, g); err != nil {
			t.Fatal(err)
		}
	}
	stop, err := operatortest.Start(env.OperatorConfig, operatorOptions)
	testenv.Must(t, err)
	defer func() { testenv.Must(t, stop()) }()
	for _, s := range svcs[:3] {
		waitKept(ctx, t, env, s)
	}
	// The orphan's pool has no group: the group lan admits it and gives it its first free address.
	waitKept(ctx, t, env, service{namespace: "legacy", name: "orphan", want: []string{"192.0.2.1"}})
	waitFor(t, 60*time.Second, func() (bool, string) {
		var events corev1.EventList
		if err := env.Admin.List(ctx, &events, client.InNamespace("legacy")); err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.InvolvedObject.Name == "orphan" && e.Reason == paasv1.EventAddressNotAdopted && strings.Contains(e.Message, "203.0.113.0") {
				return true, ""
			}
		}
		return false, "no AddressNotAdopted Event on app/orphan"
	})
	// A new Service after the rebuild still honours MetalLB's annotations.
	late := service{namespace: "app", name: "late", annotations: map[string]string{"metallb.universe.tf/address-pool": "pinned"}, want: []string{"198.51.100.1"}}
	if err := env.Admin.Create(ctx, late.object()); err != nil {
		t.Fatal(err)
	}
	waitKept(ctx, t, env, late)
}
