//go:build envtest

package cmd

import (
	"context"
	"net/netip"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestCompletionFromTheCluster: explain's arguments and the namespaces and
// nodes its flags name complete from a real API server, read through the
// kubeconfig the command line names (--kubeconfig, or $KUBECONFIG), in bash
// and through kubectl's plugin completion. A Service completes as svc/NAME,
// and only a LoadBalancer.
func TestCompletionFromTheCluster(t *testing.T) {
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	lb := func(ns, name string, typ corev1.ServiceType) client.Object {
		return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			Spec: corev1.ServiceSpec{Type: typ, Ports: []corev1.ServicePort{{Port: 80}}}}
	}
	for _, o := range []client.Object{
		&corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "shop"}},
		lb("shop", "web", corev1.ServiceTypeLoadBalancer),
		lb("shop", "api", corev1.ServiceTypeLoadBalancer),
		lb("shop", "db", corev1.ServiceTypeClusterIP),
		lb("default", "front", corev1.ServiceTypeLoadBalancer),
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node2"}},
		&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/28"}},
	} {
		if err := env.Admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	// Only the operator writes the ledger (an admission policy).
	if err := env.Operator.Create(ctx, &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(netip.MustParseAddr("192.0.2.7"))}}); err != nil {
		t.Fatal(err)
	}

	c := newCompleter(t, "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
	for _, tt := range []struct {
		line string
		want []string
	}{
		{"vip-allocator explain --kubeconfig " + kubeconfig + " -n shop svc/", []string{"svc/api", "svc/web"}},
		{"vip-allocator explain --kubeconfig " + kubeconfig + " -n shop svc/w", []string{"svc/web"}},
		{"vip-allocator explain --kubeconfig " + kubeconfig + " -n shop service/a", []string{"service/api"}},
		{"vip-allocator explain --kubeconfig " + kubeconfig + " s", []string{"svc/front"}},
		{"vip-allocator explain --kubeconfig " + kubeconfig + " node ", []string{"node1", "node2"}},
		{"vip-allocator explain --kubeconfig " + kubeconfig + " ipgroup ", []string{"lan"}},
		{"vip-allocator explain --kubeconfig " + kubeconfig + " ip 192", []string{"192.0.2.7"}},
		{"vip-allocator explain --kubeconfig " + kubeconfig + " svc/front --what-if-drain node", []string{"node1", "node2"}},
		{"vip-allocator explain --kubeconfig " + kubeconfig + " -n sh", []string{"shop"}},
		{"vip-allocator migrate plan --kubeconfig " + kubeconfig + " -n sh", []string{"shop"}},
		{"vip-allocator agent --kubeconfig " + kubeconfig + " --node-name ", []string{"node1", "node2"}},
	} {
		wantWords(t, tt.line, c.bash(t, tt.line), tt.want)
	}

	// kubectl reads $KUBECONFIG, and so does the plugin it runs.
	c = newCompleter(t, "KUBECONFIG="+kubeconfig)
	wantWords(t, "kubectl vip explain -n shop svc/", c.plugin(t, "explain", "-n", "shop", "svc/"), []string{"svc/api", "svc/web"})
	wantWords(t, "kubectl vip explain node n", c.plugin(t, "explain", "node", "n"), []string{"node1", "node2"})
	kubectl := c.linkKubectl(t)
	wantWords(t, "kubectl vip explain -n shop svc/ (kubectl)", c.kubectl(t, kubectl, "vip", "explain", "-n", "shop", "svc/"), []string{"svc/api", "svc/web"})
	wantWords(t, "kubectl vip explain svc/ (kubectl's bash)", c.kubectlBash(t, "kubectl vip explain svc/"), []string{"svc/front"})
}
