//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestAgentTeardownOnUninstall runs a real agent the way the operator's
// DaemonSet runs it (--daemonset) and stops it twice: while its DaemonSet
// exists (a restart or upgrade: traffic must keep flowing) and after the
// DaemonSet is deleted (an uninstall: every rule must go).
func TestAgentTeardownOnUninstall(t *testing.T) {
	d := setup(t)
	ctx := context.Background()
	k8s := d.env.Admin
	// The node's own rule, which the teardown must leave alone.
	d.in("node1", "iptables", "-A", "INPUT", "-p", "tcp", "--dport", "22", "-j", "ACCEPT")

	labels := map[string]string{"app.kubernetes.io/name": agent.Name}
	ds := &appsv1.DaemonSet{
		ObjectMeta: metav1.ObjectMeta{Namespace: testenv.OperatorNamespace, Name: agent.Name},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "agent", Image: "registry.example/vip-allocator:test"}}}},
		},
	}
	if err := k8s.Create(ctx, ds); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24", ExcludedIPs: []string{"192.0.2.0"}}}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": "web"},
			Ports:                         []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromInt32(8080)}},
			AllocateLoadBalancerNodePorts: ptr.To(false)},
	}
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := k8s.Create(ctx, endpointSlice("default", "web", map[string]string{"198.51.100.11": "node1"})); err != nil {
		t.Fatal(err)
	}
	var vipURL string
	testenv.Eventually(t, settle, "the Service gets a VIP", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet")
		}
		vipURL = "http://" + svc.Status.LoadBalancer.Ingress[0].IP
		return nil
	})
	d.via("node1")
	daemonSet := "--daemonset=" + testenv.OperatorNamespace + "/" + agent.Name

	t.Run("stopped while its DaemonSet exists (restart, upgrade): rules and traffic stay", func(t *testing.T) {
		d.startAgent(t, "node1", daemonSet)
		testenv.Eventually(t, settle, "served through node1", func() error { _, err := d.curl(vipURL); return err })
		d.stopAgent("node1")
		if _, err := d.curl(vipURL); err != nil {
			t.Fatalf("a restart must not interrupt traffic: %v", err)
		}
		if !hasAgentRules(d.ruleset("node1")) {
			t.Fatal("the agent's rules are gone after a restart")
		}
	})

	t.Run("stopped after its DaemonSet is deleted (uninstall): every rule is removed", func(t *testing.T) {
		// Start from no rules, so that traffic flowing proves this agent is up.
		d.in("node1", filepath.Join(d.root, "bin", "vip-allocator"), "agent", "cleanup")
		if _, err := d.curl(vipURL); err == nil {
			t.Fatal("served with no rules: the test proves nothing")
		}
		d.startAgent(t, "node1", daemonSet)
		testenv.Eventually(t, settle, "served through node1", func() error { _, err := d.curl(vipURL); return err })
		if err := k8s.Delete(ctx, ds); err != nil {
			t.Fatal(err)
		}
		d.stopAgent("node1")
		after := d.ruleset("node1")
		if hasAgentRules(after) || strings.Contains(after, "VIPA-") || !strings.Contains(after, "-A INPUT -p tcp -m tcp --dport 22 -j ACCEPT") {
			t.Fatalf("uninstall must remove the agent's rules and only those:\n%s", after)
		}
		if _, err := d.curl(vipURL); err == nil {
			t.Fatal("the VIP is still served after the uninstall")
		}
	})
}
