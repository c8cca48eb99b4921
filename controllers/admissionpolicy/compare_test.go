package admissionpolicy

import (
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// shipped is a policy and a binding as config/admission writes them.
const shipped = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p}
spec:
  matchConstraints:
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets]}
  validations:
  - {expression: "object.type == 'Opaque'", reason: Forbidden}
  variables:
  - {name: limit, expression: "3"}
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicyBinding
metadata: {name: p}
spec: {policyName: p, validationActions: [Deny]}
`

// served is the same policy as the API server returns it: defaults filled
// in, status and metadata of its own.
const served = `
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingAdmissionPolicy
metadata: {name: p, uid: u1, resourceVersion: "7", generation: 1}
spec:
  failurePolicy: Fail
  matchConstraints:
    matchPolicy: Equivalent
    namespaceSelector: {}
    objectSelector: {}
    resourceRules:
    - {apiGroups: [""], apiVersions: [v1], operations: [CREATE], resources: [secrets], scope: "*"}
  validations:
  - {expression: "object.type == 'Opaque'", reason: Forbidden}
  variables:
  - {name: limit, expression: "3"}
status: {observedGeneration: 1}
`

func objects(t *testing.T, docs ...string) []*unstructured.Unstructured {
	t.Helper()
	var out []*unstructured.Unstructured
	for _, d := range docs {
		o := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(d), &o.Object); err != nil {
			t.Fatal(err)
		}
		out = append(out, o)
	}
	return out
}

// TestCompare: what the cluster holds, step by step, and what Compare finds of
// the shipped policy and binding.
func TestCompare(t *testing.T) {
	want := objects(t, strings.Split(shipped, "\n---\n")...)
	binding := want[1]
	for _, tc := range []struct {
		desc   string
		policy string // the cluster's policy; "" for none
		edit   func(spec map[string]any)
		want   Finding
	}{
		{desc: "nothing applied", want: Finding{Kind: "ValidatingAdmissionPolicy", Name: "p", State: Missing}},
		{desc: "as the API server returns it, defaults filled in", policy: served,
			want: Finding{Kind: "ValidatingAdmissionPolicy", Name: "p", State: InForce}},
		{desc: "a validation's expression changed", policy: served,
			edit: func(s map[string]any) { s["validations"].([]any)[0].(map[string]any)["expression"] = "true" },
			want: Finding{Kind: "ValidatingAdmissionPolicy", Name: "p", State: Altered, Field: "spec.validations[0].expression"}},
		{desc: "a validation removed", policy: served,
			edit: func(s map[string]any) { s["validations"] = []any{} },
			want: Finding{Kind: "ValidatingAdmissionPolicy", Name: "p", State: Altered, Field: "spec.validations"}},
		{desc: "failurePolicy Ignore, a field config/admission leaves to the default", policy: served,
			edit: func(s map[string]any) { s["failurePolicy"] = "Ignore" },
			want: Finding{Kind: "ValidatingAdmissionPolicy", Name: "p", State: Altered, Field: "spec.failurePolicy"}},
		{desc: "an object selector added narrows what it covers", policy: served,
			edit: func(s map[string]any) {
				s["matchConstraints"].(map[string]any)["objectSelector"] = map[string]any{"matchLabels": map[string]any{"x": "y"}}
			},
			want: Finding{Kind: "ValidatingAdmissionPolicy", Name: "p", State: Altered, Field: "spec.matchConstraints.objectSelector"}},
		{desc: "a match condition added", policy: served,
			edit: func(s map[string]any) {
				s["matchConditions"] = []any{map[string]any{"name": "never", "expression": "false"}}
			},
			want: Finding{Kind: "ValidatingAdmissionPolicy", Name: "p", State: Altered, Field: "spec.matchConditions"}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := map[Key]*unstructured.Unstructured{KeyOf(binding): binding.DeepCopy()}
			if tc.policy != "" {
				p := objects(t, tc.policy)[0]
				if tc.edit != nil {
					tc.edit(p.Object["spec"].(map[string]any))
				}
				got[KeyOf(p)] = p
			}
			findings := Compare(want, got)
			if len(findings) != 2 {
				t.Fatalf("findings %+v, want one per object", findings)
			}
			if findings[0] != tc.want {
				t.Errorf("policy: got %+v, want %+v", findings[0], tc.want)
			}
			if b := findings[1]; b.State != InForce {
				t.Errorf("binding: got %+v, want it in force", b)
			}
		})
	}
}

// TestSpecDiffScalars: numbers compare by value whatever decoded them, and
// a field of the shipped spec the cluster lacks is an alteration.
func TestSpecDiffScalars(t *testing.T) {
	for _, tc := range []struct {
		desc      string
		want, got any
		diff      string
	}{
		{"int64 and float64 of one number", map[string]any{"n": float64(600)}, map[string]any{"n": int64(600)}, ""},
		{"another number", map[string]any{"n": float64(600)}, map[string]any{"n": int64(6000)}, "spec.n"},
		{"a field gone", map[string]any{"n": "a"}, map[string]any{}, "spec.n"},
		{"a list for a map", map[string]any{"n": map[string]any{}}, map[string]any{"n": []any{}}, "spec.n"},
		{"an unknown field added", map[string]any{}, map[string]any{"paramKind": map[string]any{"kind": "ConfigMap"}}, "spec.paramKind"},
		{"a defaulted field with another value", map[string]any{}, map[string]any{"matchPolicy": "Exact"}, "spec.matchPolicy"},
		{"both null", map[string]any{"n": nil}, map[string]any{"n": nil}, ""},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := specDiff("spec", tc.want, tc.got); got != tc.diff {
				t.Errorf("got %q, want %q", got, tc.diff)
			}
		})
	}
}
