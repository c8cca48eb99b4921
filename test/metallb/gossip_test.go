//go:build envtest

package metallb

import (
	"bytes"
	"context"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/cmd"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestMetalLBGossipClash: with MetalLB's speaker DaemonSet as its manifests write it
// (memberlist on, port unset: 7946) and the agents on their default, the plan names the clash
// and apply writes nothing; with the agent DaemonSet on --memberlist-port=7947 (the operator's
// --agent-args) the plan finds none and apply creates the IPGroup.
func TestMetalLBGossipClash(t *testing.T) {
	env := startEnv(t)
	ctx := context.Background()
	dir, err := Build(env.Root)
	testenv.Must(t, err)
	testenv.Must(t, InstallCRDs(env.AdminConfig, dir))
	testenv.Must(t, env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: Namespace}}))
	testenv.Must(t, env.ApplyYAML(ctx, []byte(`apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: web, namespace: metallb-system}
spec: {addresses: [192.0.2.0/28]}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: l2, namespace: metallb-system}
`)))
	testenv.Must(t, env.Admin.Create(ctx, daemonSet(Namespace, "speaker", map[string]string{"app": "metallb", "component": "speaker"}, corev1.Container{
		Name: "speaker", Image: "quay.io/metallb/speaker:v0.16.1", Args: []string{"--port=7472", "--log-level=info"},
		Env: []corev1.EnvVar{
			{Name: "METALLB_ML_BIND_ADDR", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.podIP"}}},
			{Name: "METALLB_ML_LABELS", Value: "app=metallb,component=speaker"},
			{Name: "METALLB_ML_SECRET_KEY_PATH", Value: "/etc/ml_secret_key"},
		}})))

	o := cmd.MetalLBOptions{MetalLBNamespace: Namespace}
	o.OperatorNamespace = testenv.OperatorNamespace
	var plan bytes.Buffer
	_, err = cmd.MetalLBPlan(ctx, env.AdminConfig, o, &plan)
	testenv.Must(t, err)
	if want := "problems:\n  DaemonSet metallb-system/speaker (MetalLB's speakers) and the agents (the default: no DaemonSet vip-allocator-operator/vip-allocator-agent yet) both gossip on port 7946"; !strings.Contains(plan.String(), want) {
		t.Errorf("the plan does not say %q:\n%s", want, plan.String())
	}
	var out bytes.Buffer
	if err := cmd.MetalLBApply(ctx, env.AdminConfig, o, &out); err == nil || !strings.Contains(err.Error(), "--agent-args=--memberlist-port=7947") {
		t.Errorf("apply with the clash: %v\n%s", err, out.String())
	}
	if err := env.Admin.Get(ctx, client.ObjectKey{Name: "web"}, &paasv1.IPGroup{}); !apierrors.IsNotFound(err) {
		t.Errorf("apply with the clash created IPGroup web (or: %v)", err)
	}

	testenv.Must(t, env.Admin.Create(ctx, daemonSet(testenv.OperatorNamespace, paasv1.AgentDaemonSet, map[string]string{"app.kubernetes.io/name": paasv1.AgentDaemonSet},
		corev1.Container{Name: "agent", Image: "registry.example/vip-allocator", Args: []string{"agent", "--node-name=$(NODE_NAME)", "--memberlist-port=7947"}})))
	plan.Reset()
	_, err = cmd.MetalLBPlan(ctx, env.AdminConfig, o, &plan)
	testenv.Must(t, err)
	if want := "DaemonSet metallb-system/speaker: memberlist on port 7946, the agents' on 7947 (DaemonSet vip-allocator-operator/vip-allocator-agent, --memberlist-port): no clash"; !strings.Contains(plan.String(), want) {
		t.Errorf("the plan does not say %q:\n%s", want, plan.String())
	}
	out.Reset()
	if err := cmd.MetalLBApply(ctx, env.AdminConfig, o, &out); err != nil {
		t.Fatalf("apply: %v\n%s", err, out.String())
	}
	testenv.Must(t, env.Admin.Get(ctx, client.ObjectKey{Name: "web"}, &paasv1.IPGroup{}))
}

func daemonSet(namespace, name string, labels map[string]string, c corev1.Container) *appsv1.DaemonSet {
	selector := map[string]string{"app": name}
	return &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, Labels: labels},
		Spec: appsv1.DaemonSetSpec{Selector: &metav1.LabelSelector{MatchLabels: selector},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: selector},
				Spec: corev1.PodSpec{HostNetwork: true, Containers: []corev1.Container{c}}}}}
}
