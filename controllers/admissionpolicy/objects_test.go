package admissionpolicy

import (
	"encoding/json"
	"os"
	"slices"
	"strings"
	"testing"
	"testing/fstest"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/paas-org/vip-allocator-operator/config/admission"
)

// TestPolicyObjectsMoveEveryServiceAccount: every policy of config/admission,
// read for another namespace, names that namespace's ServiceAccounts and no
// longer the bundle's, and only the namespace part changes.
func TestPolicyObjectsMoveEveryServiceAccount(t *testing.T) {
	bundled, err := Objects(admission.Files, "vip-allocator-operator")
	if err != nil {
		t.Fatal(err)
	}
	moved, err := Objects(admission.Files, "operators")
	if err != nil {
		t.Fatal(err)
	}
	if len(moved) == 0 || len(moved) != len(bundled) || len(moved)%2 != 0 {
		t.Fatalf("%d objects for another namespace, %d for the bundle's: want a policy and a binding each", len(moved), len(bundled))
	}
	named := 0
	for i, o := range moved {
		raw, _ := json.Marshal(o.Object)
		orig, _ := json.Marshal(bundled[i].Object)
		if strings.Contains(string(raw), "system:serviceaccount:vip-allocator-operator:") {
			t.Errorf("%s %s still names the bundle's namespace", o.GetKind(), o.GetName())
		}
		if strings.Contains(string(raw), "system:serviceaccount:operators:") {
			named++
		}
		if back := strings.ReplaceAll(string(raw), "system:serviceaccount:operators:", "system:serviceaccount:vip-allocator-operator:"); back != string(orig) {
			t.Errorf("%s %s: more than the namespace changed", o.GetKind(), o.GetName())
		}
	}
	if named < 4 {
		t.Errorf("only %d objects name a ServiceAccount: the ledger, Service-delete, Secret-write and agent policies all do", named)
	}
}

// TestAdmissionPoliciesRole: the OLM bundle's ClusterRole lets the operator
// get every policy and binding of config/admission by name, and do nothing
// else: it never writes what constrains it. A policy added to
// config/admission must be added there too.
func TestAdmissionPoliciesRole(t *testing.T) {
	objs, err := Objects(admission.Files, "x")
	if err != nil {
		t.Fatal(err)
	}
	var want []string
	for _, o := range objs {
		if !slices.Contains(want, o.GetName()) {
			want = append(want, o.GetName())
		}
	}
	slices.Sort(want)
	data, err := os.ReadFile("../../config/manifests/admission_policies_role.yaml")
	if err != nil {
		t.Fatal(err)
	}
	var role rbacv1.ClusterRole
	if err := yaml.Unmarshal([]byte(strings.SplitN(string(data), "\n---\n", 2)[0]), &role); err != nil {
		t.Fatal(err)
	}
	var named []string
	for _, r := range role.Rules {
		if !slices.Equal(r.Verbs, []string{"get"}) || len(r.ResourceNames) == 0 {
			t.Errorf("rule %+v: the operator may only get its policies, by name", r)
		}
		named = append(named, r.ResourceNames...)
	}
	slices.Sort(named)
	if !slices.Equal(named, want) {
		t.Errorf("config/manifests/admission_policies_role.yaml names %v, config/admission holds %v: list every policy there", named, want)
	}
}

// TestObjectsAreWhatAdministratorsApply: the policies the operator checks
// against are those of deploy/admission-policies.yaml, as kustomize renders
// them, field for field (kustomize rewrites some YAML scalars; an expression
// it changed would be reported altered on every install).
func TestObjectsAreWhatAdministratorsApply(t *testing.T) {
	want, err := Objects(admission.Files, "vip-allocator-operator")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile("../../deploy/admission-policies.yaml")
	if err != nil {
		t.Fatal(err)
	}
	rendered, err := Objects(fstest.MapFS{"admission-policies.yaml": {Data: data}}, "vip-allocator-operator")
	if err != nil {
		t.Fatal(err)
	}
	got := map[Key]*unstructured.Unstructured{}
	for _, o := range rendered {
		got[KeyOf(o)] = o
	}
	for _, f := range Compare(want, got) {
		if f.State != InForce {
			t.Errorf("%s %s: %s %s in deploy/", f.Kind, f.Name, f.State, f.Field)
		}
	}
}
