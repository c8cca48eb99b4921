package admissionpolicy

import (
	"fmt"
	"maps"
	"reflect"
	"slices"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// State is how a policy or binding of config/admission stands in the cluster.
type State string

const (
	// InForce means the object is there with the spec config/admission gives it.
	InForce State = "InForce"
	// Missing means no object of that kind and name.
	Missing State = "Missing"
	// Altered means the object is there with another spec.
	Altered State = "Altered"
)

// Finding is the state of one policy or binding of config/admission.
type Finding struct {
	Kind, Name string
	State      State
	// Field is the first spec field found altered ("" unless Altered).
	Field string
}

// Key names an object among the policies and bindings (both cluster-scoped).
type Key struct{ Kind, Name string }

// KeyOf is o's Key.
func KeyOf(o *unstructured.Unstructured) Key { return Key{o.GetKind(), o.GetName()} }

// Compare returns a Finding for each object of want, in order: whether got
// (what the cluster holds, by Key) has it with want's spec.
func Compare(want []*unstructured.Unstructured, got map[Key]*unstructured.Unstructured) []Finding {
	out := make([]Finding, 0, len(want))
	for _, w := range want {
		f := Finding{Kind: w.GetKind(), Name: w.GetName(), State: InForce}
		if g, ok := got[KeyOf(w)]; !ok {
			f.State = Missing
		} else if field := specDiff("spec", w.Object["spec"], g.Object["spec"]); field != "" {
			f.State, f.Field = Altered, field
		}
		out = append(out, f)
	}
	return out
}

// serverDefaults are the fields the API server fills in on a policy or
// binding that leaves them out, with the value it fills in; such a field in
// the cluster's object is no alteration. Any other field config/admission
// does not set is: a selector added to a binding narrows what it covers.
var serverDefaults = map[string]any{
	"failurePolicy":           "Fail",
	"matchPolicy":             "Equivalent",
	"namespaceSelector":       map[string]any{},
	"objectSelector":          map[string]any{},
	"scope":                   "*",
	"parameterNotFoundAction": "Deny",
}

// specDiff returns the path of the first field where got differs from want,
// or "" when they agree. Fields got adds are allowed only with the value the
// API server defaults them to.
func specDiff(path string, want, got any) string {
	switch w := want.(type) {
	case map[string]any:
		g, ok := got.(map[string]any)
		if !ok {
			return path
		}
		for _, k := range slices.Sorted(maps.Keys(w)) {
			if d := specDiff(path+"."+k, w[k], g[k]); d != "" {
				return d
			}
		}
		for _, k := range slices.Sorted(maps.Keys(g)) {
			if _, ok := w[k]; ok {
				continue
			}
			if def, ok := serverDefaults[k]; !ok || !reflect.DeepEqual(def, emptyMapIfNil(g[k])) {
				return path + "." + k
			}
		}
		return ""
	case []any:
		g, ok := got.([]any)
		if !ok || len(g) != len(w) {
			return path
		}
		for i := range w {
			if d := specDiff(fmt.Sprintf("%s[%d]", path, i), w[i], g[i]); d != "" {
				return d
			}
		}
		return ""
	default:
		// Numbers decode as int64 from the API server and as float64 from
		// YAML: compare what they print.
		if (got == nil) != (want == nil) || fmt.Sprint(want) != fmt.Sprint(got) {
			return path
		}
		return ""
	}
}

func emptyMapIfNil(v any) any {
	if m, ok := v.(map[string]any); ok && len(m) == 0 {
		return map[string]any{}
	}
	return v
}
