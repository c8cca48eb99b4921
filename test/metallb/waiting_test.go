//go:build envtest

package metallb

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	servicectrl "github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/test/operatortest"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestLeavesMetalLBServicesUntilApply: the bundle installed beside MetalLB, before
// 'migrate metallb apply' created any IPGroup. The operator serves the Service (its
// finalizer) but leaves MetalLB's address as MetalLB wrote it: no ledger object, no
// condition, no ipMode (kube-proxy goes on forwarding it while the agents start). When the
// group appears the Service adopts the address, and ipMode Proxy follows the owner's report
// that its data path carries it.
func TestLeavesMetalLBServicesUntilApply(t *testing.T) {
	env := startEnv(t)
	ctx := context.Background()
	const vip = "192.0.2.5"
	if err := env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "app"}}); err != nil {
		t.Fatal(err)
	}
	web := service{namespace: "app", name: "web", want: []string{vip}}
	svc := web.object()
	if err := env.Admin.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	restore := withoutStatusPolicy(ctx, t, env.Admin)
	waitFor(t, 30*time.Second, func() (bool, string) {
		if err := env.Admin.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return false, err.Error()
		}
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: vip}}
		if err := env.Admin.Status().Update(ctx, svc); err != nil {
			return false, "MetalLB's status write: " + err.Error()
		}
		return true, ""
	})
	restore()

	stop, err := operatortest.Start(env.OperatorConfig, operatorOptions)
	testenv.Must(t, err)
	defer func() { testenv.Must(t, stop()) }()
	waitFor(t, 60*time.Second, func() (bool, string) {
		if err := env.Admin.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return false, err.Error()
		}
		return slices.Contains(svc.Finalizers, servicectrl.CleanupFinalizer), "the operator has not served app/web yet"
	})
	time.Sleep(2 * time.Second) // a status write would have come by now
	if err := env.Admin.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	// The API server defaults ipMode to VIP.
	if in := svc.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != vip || in[0].IPMode != nil && *in[0].IPMode != corev1.LoadBalancerIPModeVIP {
		t.Fatalf("before any IPGroup the operator changed MetalLB's status to %+v (ipMode %v)", in, ptrString(in[0].IPMode))
	}
	if c := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionIPAllocated); c != nil {
		t.Fatalf("before any IPGroup the operator wrote %s", condString(c))
	}
	if err := env.Admin.Get(ctx, client.ObjectKey{Name: vip}, &paasv1.IP{}); !apierrors.IsNotFound(err) {
		t.Fatalf("ledger %s before any IPGroup: %v, want none", vip, err)
	}

	// What 'migrate metallb apply' creates.
	if err := env.Admin.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/27"}}); err != nil {
		t.Fatal(err)
	}
	waitKept(ctx, t, env, web)
	if err := env.Admin.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
		t.Fatal(err)
	}
	// kube-proxy keeps the address until the node announcing it carries it too.
	if in := svc.Status.LoadBalancer.Ingress; in[0].IPMode != nil && *in[0].IPMode != corev1.LoadBalancerIPModeVIP {
		t.Fatalf("adopted, no node has reported its data path, and the status is %+v, want ipMode VIP", in)
	}
	// The owner's agent announces the address and reports it programmed.
	agent, err := client.New(env.AgentConfig("node-a"), client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ip := &paasv1.IP{}
	if err := agent.Get(ctx, client.ObjectKey{Name: vip}, ip); err != nil || !ip.Spec.AwaitingDataPath {
		t.Fatalf("ledger %s: %v, awaitingDataPath %v; want it awaiting the agents' data path", vip, err, ip.Spec.AwaitingDataPath)
	}
	patch := client.MergeFrom(ip.DeepCopy())
	ip.Status.AnnouncedBy, ip.Status.ProgrammedBy = []string{"node-a"}, []string{"node-a"}
	if err := agent.Status().Patch(ctx, ip, patch); err != nil {
		t.Fatal(err)
	}
	waitFor(t, 30*time.Second, func() (bool, string) {
		if err := env.Admin.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return false, err.Error()
		}
		in := svc.Status.LoadBalancer.Ingress
		return len(in) == 1 && in[0].IPMode != nil && *in[0].IPMode == corev1.LoadBalancerIPModeProxy, fmt.Sprintf("the owner reported, the status is %+v, want ipMode Proxy", in)
	})
}

func ptrString[T ~string](p *T) string {
	if p == nil {
		return "unset"
	}
	return string(*p)
}
