package service

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
)

// What MetalLB's speakers say of a Service's layer-2 node counts only when
// every status of that Service names the same, well-formed node, and each was
// written by the speaker of the node it names: labelled with that node and
// owned by a pod the API server shows on it.
func TestOneL2Node(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"}}
	speakers := map[types.UID]string{"speaker-n1": "n1", "speaker-n2": "n2"}
	podNode := func(ref metav1.OwnerReference) string { return speakers[ref.UID] }
	byPod := func(uid types.UID) []metav1.OwnerReference {
		return []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: string(uid), UID: uid}}
	}
	item := func(ns, name, node, label string, owners []metav1.OwnerReference) unstructured.Unstructured {
		u := unstructured.Unstructured{Object: map[string]any{"status": map[string]any{
			"node": node, "serviceName": name, "serviceNamespace": ns}}}
		u.SetLabels(map[string]string{metallbNodeLabel: label})
		u.SetOwnerReferences(owners)
		return u
	}
	status := func(ns, name, node string) unstructured.Unstructured {
		return item(ns, name, node, node, byPod(types.UID("speaker-"+node)))
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
		{"not a node name", []unstructured.Unstructured{item("shop", "web", "N1/../x", "N1/../x", byPod("speaker-n1"))}, ""},
		{"no node", []unstructured.Unstructured{item("shop", "web", "", "", byPod("speaker-n1"))}, ""},
		{"labelled with another node than its status names", []unstructured.Unstructured{item("shop", "web", "n1", "n2", byPod("speaker-n1"))}, ""},
		{"owned by no pod", []unstructured.Unstructured{item("shop", "web", "n1", "n1", nil)}, ""},
		{"owned by the speaker of another node", []unstructured.Unstructured{item("shop", "web", "n1", "n1", byPod("speaker-n2"))}, ""},
		{"owned by a pod that does not exist", []unstructured.Unstructured{item("shop", "web", "n1", "n1", byPod("gone"))}, ""},
		{"owned by something else than a pod", []unstructured.Unstructured{item("shop", "web", "n1", "n1",
			[]metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "DaemonSet", Name: "speaker-n1", UID: "speaker-n1"}})}, ""},
		{"a forged status beside the speaker's, naming another node", []unstructured.Unstructured{status("shop", "web", "n1"),
			item("shop", "web", "n2", "n2", nil)}, "n1"},
	} {
		if got := oneL2Node(tc.items, svc, podNode); got != tc.want {
			t.Errorf("%s: oneL2Node = %q, want %q", tc.desc, got, tc.want)
		}
	}
}
