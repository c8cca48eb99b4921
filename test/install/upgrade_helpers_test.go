//go:build envtest

package install

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from this run")

// originalBundle is the original operator's released deploy/bundle.yaml, read
// from ../shared/fixtures/original-operator beside the repository (never
// copied into it).
func originalBundle(t *testing.T, release string) string {
	t.Helper()
	path := filepath.Join(testenv.RepoRoot(), "..", "shared", "fixtures", "original-operator", release+"-bundle.yaml")
	if _, err := os.Stat(path); err != nil {
		t.Fatalf("the original operator's %s bundle is read from beside the repository: %v", release, err)
	}
	return path
}

// withoutWebhook is the bundle without its ValidatingWebhookConfiguration: the
// original-era ledger objects are written first, as if its webhook pod had
// answered, and the configuration is registered after them, with no pod behind it.
func withoutWebhook(t *testing.T, path string) string {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var kept []string
	for _, doc := range strings.Split(string(data), "\n---\n") {
		if !strings.Contains(doc, "kind: ValidatingWebhookConfiguration") {
			kept = append(kept, doc)
		}
	}
	if len(kept) == len(strings.Split(string(data), "\n---\n")) {
		t.Fatal("the original's bundle has no ValidatingWebhookConfiguration")
	}
	return strings.Join(kept, "\n---\n")
}

// originalService is a LoadBalancer Service as the original operator left it.
type originalService struct {
	name, ip string
	// loadBalancerIP: the user asked for the address.
	loadBalancerIP bool
	// deleting: deleted under the original operator, held by its finalizer.
	deleting bool
}

const (
	shop       = "shop"
	labGroup   = "lab"
	labSegment = "192.0.2.0/24"
)

var originalServices = []originalService{
	{name: "api", ip: "192.0.2.1"},
	{name: "web", ip: "192.0.2.7", loadBalancerIP: true},
	{name: "old", ip: "192.0.2.3", deleting: true},
}

// createOriginalService writes a Service the way the original's Service
// controller does (controllers/service_controller.go of 0.3 and 1.0): the
// ledger IP object named by the address with label ipgroup=<group> and the
// owner annotation, no spec; then status.loadBalancerIP.ingress [{ip}]; then
// the finalizer ips.paas.org/finalizer. The user's writes are admin's, the
// original's are its ServiceAccount's (its RBAC from its bundle).
func createOriginalService(ctx context.Context, t *testing.T, admin, original client.Client, s originalService) {
	t.Helper()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: shop, Name: s.name},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": s.name},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
	if s.loadBalancerIP {
		svc.Spec.LoadBalancerIP = s.ip
	}
	testenv.Must(t, admin.Create(ctx, svc))
	ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: s.ip, Labels: map[string]string{paasv1.IPGroupLabel: labGroup},
		Annotations: map[string]string{paasv1.OwnerAnnotation: shop + "/" + s.name}}}
	testenv.Must(t, original.Create(ctx, ip))
	svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: s.ip}}
	testenv.Must(t, original.Status().Update(ctx, svc))
	svc.Finalizers = append(svc.Finalizers, paasv1.OriginalServiceFinalizer)
	testenv.Must(t, original.Update(ctx, svc))
	if s.deleting {
		testenv.Must(t, admin.Delete(ctx, svc))
	}
}

// impersonating is a client as user, in namespace's ServiceAccount groups.
func impersonating(t *testing.T, base *rest.Config, user string) client.Client {
	t.Helper()
	cfg := rest.CopyConfig(base)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: user,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	testenv.Must(t, err)
	return c
}

// impersonatingAgent is the agent of node, as its Pod-bound token names it
// (identity_test.go tests with the real tokens).
func impersonatingAgent(t *testing.T, base *rest.Config, node string) client.Client {
	t.Helper()
	c, err := client.New(testenv.AsAgent(base, node), client.Options{Scheme: paasv1.NewScheme()})
	testenv.Must(t, err)
	return c
}

// findEvent finds a Warning Event reason on Service shop/name whose message
// names the original's webhook and the command that removes it.
func findEvent(ctx context.Context, c client.Client, name, reason string) error {
	var events corev1.EventList
	if err := c.List(ctx, &events, client.InNamespace(shop)); err != nil {
		return err
	}
	for _, e := range events.Items {
		if e.InvolvedObject.Name == name && e.Reason == reason && e.Type == corev1.EventTypeWarning &&
			strings.Contains(e.Message, "vip.kb.io") && strings.Contains(e.Message, "vip-allocator migrate upgrade") {
			return nil
		}
	}
	return fmt.Errorf("no %s Event on %s among %d", reason, name, len(events.Items))
}

// ledgerUIDs maps each ledger object to its uid: an object deleted and
// recreated (its address free for a moment) gets another.
func ledgerUIDs(ctx context.Context, t *testing.T, c client.Client) map[string]types.UID {
	t.Helper()
	var ips paasv1.IPList
	testenv.Must(t, c.List(ctx, &ips))
	out := map[string]types.UID{}
	for _, ip := range ips.Items {
		out[ip.Name] = ip.UID
	}
	return out
}

// serviceAddrs maps each LoadBalancer Service to the addresses in its status.
func serviceAddrs(ctx context.Context, t *testing.T, c client.Client) map[string]string {
	t.Helper()
	var list corev1.ServiceList
	testenv.Must(t, c.List(ctx, &list))
	out := map[string]string{}
	for _, s := range list.Items {
		var ips []string
		for _, in := range s.Status.LoadBalancer.Ingress {
			ips = append(ips, in.IP)
		}
		if len(ips) > 0 {
			out[s.Namespace+"/"+s.Name] = strings.Join(ips, ",")
		}
	}
	return out
}

func mapsEqual(a, b map[string]types.UID) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		testenv.Must(t, os.MkdirAll("testdata", 0o755))
		testenv.Must(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s is missing: run the test with -update", path)
	}
	testenv.Must(t, err)
	if string(want) != got {
		t.Errorf("output differs from %s (run with -update if the change is right):\n--- want\n%s\n--- got\n%s", path, want, got)
	}
}
