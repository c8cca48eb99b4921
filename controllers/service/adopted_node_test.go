package service

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// What MetalLB's speakers say of a Service's layer-2 node counts only when
// every status of that Service names the same, well-formed node.
func TestOneL2Node(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	status := func(ns, name, node string) unstructured.Unstructured {
		return unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
			"node": node, "serviceName": name, "serviceNamespace": ns}}}
	}
	for _, tc := range []struct {
		desc  string
		items []unstructured.Unstructured
		want  string
	}{
		{"none", nil, ""},
		{"one", []unstructured.Unstructured{status("shop", "web", "n1")}, "n1"},
		{"two agreeing", []unstructured.Unstructured{status("shop", "web", "n1"), status("shop", "web", "n1")}, "n1"},
		{"two disagreeing (a move)", []unstructured.Unstructured{status("shop", "web", "n1"), status("shop", "web", "n2")}, ""},
		{"another Service's", []unstructured.Unstructured{status("shop", "api", "n1")}, ""},
		{"another namespace's", []unstructured.Unstructured{status("dev", "web", "n1")}, ""},
		{"not a node name", []unstructured.Unstructured{status("shop", "web", "N1/../x")}, ""},
		{"no node", []unstructured.Unstructured{status("shop", "web", "")}, ""},
	} {
		if got := oneL2Node(tc.items, svc); got != tc.want {
			t.Errorf("%s: oneL2Node = %q, want %q", tc.desc, got, tc.want)
		}
	}
}
