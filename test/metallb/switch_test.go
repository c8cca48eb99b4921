//go:build envtest

package metallb

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiextensionsv1 "k8s.io/apiextensions-apiserver/pkg/apis/apiextensions/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/cmd"
	agentctrl "github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/test/operatortest"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

var update = flag.Bool("update", false, "rewrite the golden files under testdata/ from this run")

// TestMetalLBSwitch is the switch from MetalLB in place: MetalLB's controller allocates
// first; "migrate metallb plan" prints the conversion (golden); "apply" creates the IPGroups
// and BGPPeers; MetalLB's controller is stopped and our operator started: every Service keeps
// its address with IPAllocated=True and a ledger object (the pair sharing one address under
// allow-shared-ip both listed on one); new Services get free addresses from the converted
// groups, by MetalLB's annotations.
func TestMetalLBSwitch(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	env := startEnv(t)
	ctx := context.Background()
	restore := withoutStatusPolicy(ctx, t, env.Admin)
	mlb := runMetalLB(ctx, t, env)
	if err := env.Admin.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: Namespace, Name: "tor-password"},
		Type: corev1.SecretTypeBasicAuth, Data: map[string][]byte{"password": []byte("tor-secret")}}); err != nil {
		t.Fatal(err)
	}

	// The plan, from what MetalLB left: read only.
	o := cmd.MetalLBOptions{MetalLBNamespace: Namespace}
	o.OperatorNamespace = testenv.OperatorNamespace
	var plan bytes.Buffer
	if _, err := cmd.MetalLBPlan(ctx, env.AdminConfig, o, &plan); err != nil {
		t.Fatal(err)
	}
	golden(t, "plan.golden", plan.String())

	// The API server prunes fields its CRD does not know: without spec.addresses apply would
	// create groups with no addresses and every wait below would time out without saying why.
	if !ipGroupHasAddresses(ctx, t, env) {
		t.Fatal("the installed IPGroup CRD has no spec.addresses: apply cannot create groups of several parts (are config/crd's files stale? make manifests)")
	}

	// MetalLB stops first (our install's status policy would refuse its writes anyway), then
	// apply, then the operator: the order "migrate metallb apply --scale-down-controller" gives.
	mlb.Stop()
	restore()
	var applied bytes.Buffer
	if err := cmd.MetalLBApply(ctx, env.AdminConfig, o, &applied); err != nil {
		t.Fatalf("apply: %v\n%s", err, applied.String())
	}
	t.Logf("apply:\n%s", applied.String())
	// Idempotent: a second apply creates nothing.
	var again bytes.Buffer
	if err := cmd.MetalLBApply(ctx, env.AdminConfig, o, &again); err != nil || strings.Contains(again.String(), "created") {
		t.Fatalf("second apply: %v\n%s", err, again.String())
	}

	stop, err := operatortest.Start(env.OperatorConfig, operatorOptions)
	testenv.Must(t, err)
	defer func() { testenv.Must(t, stop()) }()
	// Every one, the pair sharing 192.0.2.18 under allow-shared-ip too.
	for _, s := range services {
		waitKept(ctx, t, env, s)
	}
	var ips paasv1.IPList
	if err := env.Admin.List(ctx, &ips); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d ledger objects after the switch", len(ips.Items))

	// New Services: from the converted groups, by MetalLB's annotations.
	fresh := []service{
		{namespace: "shop", name: "new-auto", want: []string{"192.0.2.11"}},
		{namespace: "install", name: "new-assisted", annotations: map[string]string{"metallb.universe.tf/address-pool": "assisted"}, want: []string{"198.51.100.2"}},
		{namespace: "shop", name: "new-requested", annotations: map[string]string{"metallb.io/loadBalancerIPs": "192.0.2.67"}, want: []string{"192.0.2.67"}},
	}
	for _, s := range fresh {
		if err := env.Admin.Create(ctx, s.object()); err != nil {
			t.Fatal(err)
		}
		waitKept(ctx, t, env, s)
	}
}

// waitKept waits until s shows its wanted addresses with IPAllocated=True and a ledger object
// naming it for each.
func waitKept(ctx context.Context, t *testing.T, env *testenv.Env, s service) {
	t.Helper()
	waitFor(t, 60*time.Second, func() (bool, string) {
		svc := &corev1.Service{}
		if err := env.Admin.Get(ctx, client.ObjectKey{Namespace: s.namespace, Name: s.name}, svc); err != nil {
			return false, err.Error()
		}
		got := ingressIPs(svc)
		cond := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionIPAllocated)
		if !slices.Equal(got, s.want) || cond == nil || cond.Status != metav1.ConditionTrue {
			return false, "Service " + s.namespace + "/" + s.name + " shows " + strings.Join(got, ",") + ", want " + strings.Join(s.want, ",") + "; condition " + condString(cond)
		}
		for _, addr := range s.want {
			ip := &paasv1.IP{}
			if err := env.Admin.Get(ctx, client.ObjectKey{Name: strings.ReplaceAll(addr, ":", "-")}, ip); err != nil {
				return false, "ledger " + addr + ": " + err.Error()
			}
			holders := slices.Clone(ip.Spec.SharedWith)
			if ip.Spec.Owner != nil {
				holders = append(holders, *ip.Spec.Owner)
			}
			if !slices.ContainsFunc(holders, func(o paasv1.IPOwner) bool { return o.UID == svc.UID }) {
				return false, "ledger " + addr + " does not list " + s.namespace + "/" + s.name + " among its holders"
			}
		}
		return true, ""
	})
}

func condString(c *metav1.Condition) string {
	if c == nil {
		return "absent"
	}
	return string(c.Status) + " " + c.Reason + ": " + c.Message
}

// ipGroupHasAddresses reports whether the installed IPGroup CRD knows spec.addresses.
func ipGroupHasAddresses(ctx context.Context, t *testing.T, env *testenv.Env) bool {
	t.Helper()
	scheme := runtime.NewScheme()
	if err := apiextensionsv1.AddToScheme(scheme); err != nil {
		t.Fatal(err)
	}
	c, err := client.New(env.AdminConfig, client.Options{Scheme: scheme})
	if err != nil {
		t.Fatal(err)
	}
	crd := &apiextensionsv1.CustomResourceDefinition{}
	if err := c.Get(ctx, client.ObjectKey{Name: "ipgroups.paas.org"}, crd); err != nil {
		t.Fatal(err)
	}
	for _, v := range crd.Spec.Versions {
		if v.Schema != nil && v.Schema.OpenAPIV3Schema != nil {
			if _, ok := v.Schema.OpenAPIV3Schema.Properties["spec"].Properties["addresses"]; ok {
				return true
			}
		}
	}
	return false
}

// operatorOptions are the flags the operator runs with here (operatortest.Start), as
// test/integration's do.
var operatorOptions = cmd.OperatorOptions{MetricsAddr: "0", ProbeAddr: "0", Workers: 4, IPMode: "Proxy",
	Agent: agentctrl.Options{Namespace: testenv.OperatorNamespace, Image: "registry.example/vip-allocator:test"}}

// golden compares got with testdata/name, or rewrites it with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run with -update to write it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs from this run (rerun with -update and review the diff):\n%s", path, got)
	}
}
