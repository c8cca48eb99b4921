//go:build envtest

package metallb

import (
	"bytes"
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/cmd"
	"github.com/paas-org/vip-allocator-operator/migration"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// reachDecoys sit beside a MetalLB configuration: a BGPPeer naming a password Secret of another
// namespace, a second Deployment labelled component=controller (an ingress controller's), and
// an IPGroup with a pool's name but other addresses.
const reachDecoys = `apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: web, namespace: metallb-system}
spec: {addresses: [192.0.2.0/28]}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: l2, namespace: metallb-system}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: tor, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64513, peerAddress: 198.51.100.254, passwordSecret: {name: tor-password}}
---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: stolen, namespace: metallb-system}
spec: {myASN: 64512, peerASN: 64513, peerAddress: 198.51.100.253, passwordSecret: {name: db-password, namespace: shop}}
---
apiVersion: paas.org/v1
kind: IPGroup
metadata: {name: web}
spec: {segment: 10.0.0.0/24}
`

// TestMetalLBApplyTouchesOnlyWhatThePlanNames: apply refuses the differing IPGroup (and then
// scales nothing), never copies the other namespace's password, and once the IPGroup is made
// identical scales down MetalLB's controller Deployment and nothing else.
func TestMetalLBApplyTouchesOnlyWhatThePlanNames(t *testing.T) {
	env := startEnv(t)
	ctx := context.Background()
	dir, err := Build(env.Root)
	testenv.Must(t, err)
	testenv.Must(t, InstallCRDs(env.AdminConfig, dir))
	for _, ns := range []string{Namespace, "shop"} {
		testenv.Must(t, env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}))
	}
	testenv.Must(t, env.ApplyYAML(ctx, []byte(reachDecoys)))
	for _, s := range []struct{ ns, name, pw string }{{Namespace, "tor-password", "tor-secret"}, {"shop", "db-password", "database"}} {
		testenv.Must(t, env.Admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: s.ns, Name: s.name}, Data: map[string][]byte{"password": []byte(s.pw)}}))
	}
	metallbController := deployment("controller", map[string]string{"app": "metallb", "component": "controller"})
	ingress := deployment("ingress-nginx-controller", map[string]string{"app.kubernetes.io/name": "ingress-nginx", "app.kubernetes.io/component": "controller"})
	testenv.Must(t, env.Admin.Create(ctx, metallbController))
	testenv.Must(t, env.Admin.Create(ctx, ingress))

	o := cmd.MetalLBOptions{MetalLBNamespace: Namespace}
	o.OperatorNamespace = testenv.OperatorNamespace
	o.ScaleDownController = true
	var plan bytes.Buffer
	p, err := cmd.MetalLBPlan(ctx, env.AdminConfig, o, &plan)
	testenv.Must(t, err)
	for _, want := range []string{
		"IPGroup web exists already and differs: apply refuses the pool",
		"BGPPeer stolen: its passwordSecret shop/db-password is outside MetalLB's namespace metallb-system",
		"MetalLB's controller: Deployment metallb-system/controller (uid " + string(metallbController.UID) + ")",
		"not touched:\n  Deployment metallb-system/ingress-nginx-controller: labelled a controller, but not MetalLB's",
	} {
		if !strings.Contains(plan.String(), want) {
			t.Errorf("the plan does not say %q:\n%s", want, plan.String())
		}
	}

	var out bytes.Buffer
	err = cmd.MetalLBApply(ctx, env.AdminConfig, o, &out)
	if err == nil || !strings.Contains(err.Error(), "IPGroup web exists and differs") {
		t.Errorf("apply over a differing IPGroup: %v\n%s", err, out.String())
	}
	group := &paasv1.IPGroup{}
	testenv.Must(t, env.Admin.Get(ctx, client.ObjectKey{Name: "web"}, group))
	if group.Spec.Segment != "10.0.0.0/24" {
		t.Errorf("the differing IPGroup was changed: %+v", group.Spec)
	}
	checkReplicas(ctx, t, env, metallbController, 1)
	passwords := &corev1.Secret{}
	testenv.Must(t, env.Admin.Get(ctx, client.ObjectKey{Namespace: testenv.OperatorNamespace, Name: migration.MetalLBPasswordSecret}, passwords))
	if _, ok := passwords.Data["stolen"]; ok || string(passwords.Data["tor"]) != "tor-secret" {
		t.Errorf("password Secret keys %v: want tor only", passwords.Data)
	}
	if err := env.Admin.Get(ctx, client.ObjectKey{Name: "stolen"}, &paasv1.BGPPeer{}); err == nil {
		t.Error("the BGPPeer whose password is in namespace shop was created")
	}

	// Made identical to the conversion, the IPGroup is left as it is and apply goes on.
	group.Spec = *groupNamed(p, "web").DeepCopy()
	testenv.Must(t, env.Admin.Update(ctx, group))
	out.Reset()
	if err := cmd.MetalLBApply(ctx, env.AdminConfig, o, &out); err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	if !strings.Contains(out.String(), "IPGroup web exists, identical: left as it is") {
		t.Errorf("apply:\n%s", out.String())
	}
	checkReplicas(ctx, t, env, metallbController, 0)
	checkReplicas(ctx, t, env, ingress, 1)
}

func groupNamed(p migration.MetalLBPlan, pool string) *paasv1.IPGroupSpec {
	for _, g := range p.Groups {
		if g.Pool == pool {
			return &g.Group.Spec
		}
	}
	return &paasv1.IPGroupSpec{}
}

func deployment(name string, labels map[string]string) *appsv1.Deployment {
	one := int32(1)
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: name, Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "registry.example/" + name}}}}}}
}

func checkReplicas(ctx context.Context, t *testing.T, env *testenv.Env, d *appsv1.Deployment, want int32) {
	t.Helper()
	got := &appsv1.Deployment{}
	testenv.Must(t, env.Admin.Get(ctx, client.ObjectKeyFromObject(d), got))
	if got.Spec.Replicas == nil || *got.Spec.Replicas != want {
		t.Errorf("Deployment %s has %v replicas, want %d", d.Name, got.Spec.Replicas, want)
	}
}
