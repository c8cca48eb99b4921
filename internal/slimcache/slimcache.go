// Package slimcache is the informer-cache transform the operator, the agent
// and the migrate command share: it drops what no reconciler reads and what
// makes up most of a cached object's size. It must never drop a field a
// reconciler reads.
package slimcache

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Transform drops managed fields and kubectl's last-applied copy from every
// object, and the image lists from Nodes.
func Transform(in any) (any, error) {
	if o, ok := in.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
			delete(a, corev1.LastAppliedConfigAnnotation)
			o.SetAnnotations(a)
		}
	}
	// Nodes are read for labels, cordon and interfaces; their image lists
	// (often tens of KiB each) would only fill memory.
	if n, ok := in.(*corev1.Node); ok {
		n.Status.Images = nil
	}
	return in, nil
}
