//go:build envtest

package install

import (
	"bytes"
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/migration"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// upgradeDecoys resemble the original's objects without being them: another
// ServiceAccount of the namespace bound to cluster-admin, a webhook for every
// group served from the namespace, the original's image in another namespace.
// "migrate upgrade" must leave each, and the plan names each. The webhook
// intercepts nothing (its objectSelector matches no object, failurePolicy
// Ignore), so it cannot disturb the upgrade it is a decoy for.
const upgradeDecoys = `apiVersion: rbac.authorization.k8s.io/v1
kind: ClusterRoleBinding
metadata: {name: admin-for-default-sa}
roleRef: {apiGroup: rbac.authorization.k8s.io, kind: ClusterRole, name: cluster-admin}
subjects: [{kind: ServiceAccount, name: default, namespace: vip-allocator-operator}]
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata: {name: policy}
webhooks:
- name: policy.example.com
  admissionReviewVersions: [v1]
  sideEffects: None
  failurePolicy: Ignore
  timeoutSeconds: 1
  objectSelector: {matchLabels: {decoy: never}}
  clientConfig: {service: {namespace: vip-allocator-operator, name: policy}}
  rules: [{apiGroups: ["*"], apiVersions: ["*"], operations: ["*"], resources: ["*"]}]
---
apiVersion: v1
kind: Namespace
metadata: {name: lab}
---
apiVersion: apps/v1
kind: Deployment
metadata: {name: vip-allocator-operator-controller-manager, namespace: lab}
spec:
  selector: {matchLabels: {app: copy}}
  template:
    metadata: {labels: {app: copy}}
    spec: {containers: [{name: manager, image: "docker.io/paasteam324/vip-allocator-operator:1.0"}]}
`

// decoyObjects are the decoys as kubectl names them, and as the plan does.
var decoyObjects = []struct{ kubectl, plan string }{
	{"clusterrolebinding/admin-for-default-sa", "ClusterRoleBinding admin-for-default-sa: binds ServiceAccount vip-allocator-operator/default to cluster-admin, but is not the original's binding"},
	{"validatingwebhookconfiguration/policy", "ValidatingWebhookConfiguration policy: its webhook policy.example.com (Service vip-allocator-operator/policy) intercepts paas.org *, but is not the original's"},
	{"-n lab deployment/vip-allocator-operator-controller-manager", "Deployment lab/vip-allocator-operator-controller-manager: runs the original's image docker.io/paasteam324/vip-allocator-operator:1.0 but is not its Deployment"},
}

func createDecoys(t *testing.T, c *cluster) {
	t.Helper()
	if out, err := c.kubectl(upgradeDecoys, "create", "-f", "-"); err != nil {
		t.Fatal(out)
	}
}

// checkDecoysLeft checks that every decoy is still there and that out (the
// upgrade's output, which ends with the plan) names it as not touched.
func checkDecoysLeft(t *testing.T, c *cluster, out string) {
	t.Helper()
	for _, d := range decoyObjects {
		if _, err := c.kubectl("", append([]string{"get"}, strings.Fields(d.kubectl)...)...); err != nil {
			t.Errorf("%s was deleted: %v", d.kubectl, err)
		}
		if !strings.Contains(out, "\n  "+d.plan) {
			t.Errorf("the upgrade does not name %s as not touched:\n%s", d.kubectl, out)
		}
	}
	if strings.Contains(out, "deleted ClusterRoleBinding admin-for-default-sa") || strings.Contains(out, "deleted ValidatingWebhookConfiguration policy") ||
		strings.Contains(out, "deleted Deployment lab/") {
		t.Errorf("the upgrade says it deleted a decoy:\n%s", out)
	}
}

// checkSwappedIsLeft: an object the plan saw, deleted and created again under
// the same name since (another uid), is not the object the plan decided on:
// applying that plan leaves it and says why.
func checkSwappedIsLeft(ctx context.Context, t *testing.T, admin client.Client) {
	t.Helper()
	in, err := migration.ObserveInstallation(ctx, admin, namespace, false)
	testenv.Must(t, err)
	p := migration.PlanUpgrade(in)
	var onlySA migration.UpgradePlan
	for _, r := range p.Remove {
		if r.Kind == "ServiceAccount" {
			onlySA.Remove = append(onlySA.Remove, r)
		}
	}
	if len(onlySA.Remove) != 1 {
		t.Fatalf("the plan removes no ServiceAccount: %+v", p.Remove)
	}
	sa := &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = namespace, paasv1.OriginalServiceAccount
	testenv.Must(t, admin.Delete(ctx, sa))
	sa = &corev1.ServiceAccount{}
	sa.Namespace, sa.Name = namespace, paasv1.OriginalServiceAccount
	testenv.Must(t, admin.Create(ctx, sa))
	var out bytes.Buffer
	err = migration.ApplyUpgrade(ctx, admin, onlySA, &out)
	if err == nil || !strings.Contains(err.Error(), "no longer the object the plan saw") {
		t.Errorf("applying a plan whose ServiceAccount was swapped: %v\n%s", err, out.String())
	}
	testenv.Must(t, admin.Get(ctx, client.ObjectKeyFromObject(sa), sa))
}
