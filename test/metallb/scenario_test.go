//go:build envtest

package metallb

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// service is a LoadBalancer Service of the scenario, created while MetalLB serves them.
type service struct {
	namespace, name string
	annotations     map[string]string
	labels          map[string]string
	dualStack       bool
	protocol        corev1.Protocol
	port            int32
	// want is what MetalLB v0.16.1 gives it (its own choice for the unrequested ones).
	want []string
}

// services are the seed scenarios' Services: an automatic one, requested IPs under both
// annotation prefixes, a pair sharing an address, a hosted control plane's API server on a /32
// pool picked by annotation, an assisted installer's Service on an autoAssign:false pool, and a
// dual-stack one.
var services = []service{
	{namespace: "shop", name: "web-a", want: []string{"192.0.2.10"}},
	{namespace: "shop", name: "web-b", annotations: map[string]string{"metallb.io/loadBalancerIPs": "192.0.2.15"}, want: []string{"192.0.2.15"}},
	{namespace: "shop", name: "legacy", annotations: map[string]string{"metallb.universe.tf/loadBalancerIPs": "192.0.2.66"}, want: []string{"192.0.2.66"}},
	{namespace: "shop", name: "dns-tcp", port: 53, annotations: map[string]string{"metallb.io/allow-shared-ip": "dns", "metallb.io/loadBalancerIPs": "192.0.2.18"}, want: []string{"192.0.2.18"}},
	{namespace: "shop", name: "dns-udp", port: 53, protocol: corev1.ProtocolUDP, annotations: map[string]string{"metallb.universe.tf/allow-shared-ip": "dns", "metallb.io/loadBalancerIPs": "192.0.2.18"}, want: []string{"192.0.2.18"}},
	{namespace: "hcp", name: "kube-apiserver", port: 6443, annotations: map[string]string{"metallb.io/address-pool": "api-vip"}, want: []string{"203.0.113.20"}},
	{namespace: "install", name: "assisted", annotations: map[string]string{"metallb.universe.tf/address-pool": "assisted"}, want: []string{"198.51.100.1"}},
	{namespace: "dual", name: "front", labels: map[string]string{"tier": "front"}, dualStack: true, want: []string{"192.0.2.128", "2001:db8:1::10"}},
}

func (s service) object() *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: s.namespace, Name: s.name, Annotations: s.annotations, Labels: s.labels},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Selector: map[string]string{"app": s.name},
			Ports: []corev1.ServicePort{{Name: "p", Port: max(s.port, 80), Protocol: cmpOr(s.protocol, corev1.ProtocolTCP)}}}}
	if s.dualStack {
		policy := corev1.IPFamilyPolicyRequireDualStack
		svc.Spec.IPFamilyPolicy = &policy
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol}
	}
	return svc
}

func cmpOr[T comparable](v, def T) T {
	var zero T
	if v == zero {
		return def
	}
	return v
}

// ingressIPs reads a Service's status addresses.
func ingressIPs(svc *corev1.Service) []string {
	var out []string
	for _, in := range svc.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// applyFixture creates the objects of testdata/name as admin.
func applyFixture(ctx context.Context, t *testing.T, env *testenv.Env, name string) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	if err := env.ApplyYAML(ctx, data); err != nil {
		t.Fatalf("apply %s: %v", name, err)
	}
}

// withoutStatusPolicy: MetalLB ran before this project was installed, so the scenario lifts the
// status policy for MetalLB's time and puts it back after.
func withoutStatusPolicy(ctx context.Context, t *testing.T, c client.Client) (restore func()) {
	t.Helper()
	put, err := testenv.WithoutStatusPolicy(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	return func() {
		t.Helper()
		if err := put(); err != nil {
			t.Fatal(err)
		}
	}
}

// runMetalLB installs MetalLB's CRDs and configuration, runs its controller, creates the
// scenario's Services and waits until MetalLB gave each the address it is expected to. It
// returns the controller, still running.
func runMetalLB(ctx context.Context, t *testing.T, env *testenv.Env) *Controller {
	t.Helper()
	ctl := startMetalLB(ctx, t, env)
	applyFixture(ctx, t, env, "metallb.yaml")
	for _, ns := range []string{"shop", "hcp", "install", "dual"} {
		if err := env.Admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil && !apierrors.IsAlreadyExists(err) {
			t.Fatal(err)
		}
	}
	// One at a time: MetalLB's choice for an unrequested Service depends on what is taken.
	for _, s := range services {
		if err := env.Admin.Create(ctx, s.object()); err != nil {
			t.Fatalf("create Service %s/%s: %v", s.namespace, s.name, err)
		}
		waitFor(t, 60*time.Second, func() (bool, string) {
			if exited, err := ctl.Exited(); exited {
				t.Fatalf("MetalLB controller exited: %v", err)
			}
			svc := &corev1.Service{}
			if err := env.Admin.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, svc); err != nil {
				return false, err.Error()
			}
			got := ingressIPs(svc)
			return slices.Equal(got, s.want), "Service " + s.namespace + "/" + s.name + " shows " + strings.Join(got, ",") + ", want " + strings.Join(s.want, ",")
		})
	}
	return ctl
}

// startMetalLB builds MetalLB (once), installs its CRDs and runs its controller as admin until
// the test ends; its log is shown when the test failed.
func startMetalLB(ctx context.Context, t *testing.T, env *testenv.Env) *Controller {
	t.Helper()
	dir, err := Build(env.Root)
	if err != nil {
		t.Fatal(err)
	}
	if err := InstallCRDs(env.AdminConfig, dir); err != nil {
		t.Fatal(err)
	}
	kubeconfig, err := env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ctl, err := Start(ctx, env.Admin, dir, kubeconfig)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if log := ctl.Stop(); t.Failed() {
			t.Logf("MetalLB controller log:\n%s", testenv.Tail(log, 60))
		}
	})
	return ctl
}

// waitFor waits until cond holds (testenv.Eventually); cond's text says what it waits for.
func waitFor(t *testing.T, timeout time.Duration, cond func() (bool, string)) {
	t.Helper()
	testenv.Eventually(t, timeout, "timed out", func() error {
		if ok, msg := cond(); !ok {
			return errors.New(msg)
		}
		return nil
	})
}

// TestMetalLBAllocates runs the real MetalLB controller on the local control plane: its pools
// with ranges, a /32 pool, an autoAssign:false pool picked by annotation, requested IPs under
// both annotation prefixes, a shared IP and a dual-stack Service all get MetalLB's addresses.
// The migration tests start from this state.
func TestMetalLBAllocates(t *testing.T) {
	env := startEnv(t)
	ctx := context.Background()
	restore := withoutStatusPolicy(ctx, t, env.Admin)
	defer restore()
	runMetalLB(ctx, t, env)
}

func startEnv(t *testing.T) *testenv.Env {
	t.Helper()
	env, err := testenv.Start()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := env.Stop(); err != nil {
			t.Error(err)
		}
	})
	return env
}
