package predicates

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// IPGroupChanged passes the IPGroup events that change what a group hands out
// or keeps: its spec (generation), its deletion, its release annotation.
var IPGroupChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		return !e.ObjectOld.GetDeletionTimestamp().Equal(e.ObjectNew.GetDeletionTimestamp()) ||
			e.ObjectOld.(*paasv1.IPGroup).ReleasesAddresses() != e.ObjectNew.(*paasv1.IPGroup).ReleasesAddresses()
	},
})

// NodeAnnouncingChanged reports a change of what decides whether a node can
// announce: labels, cordon, published interfaces. Status heartbeats are not.
func NodeAnnouncingChanged(old, cur *corev1.Node) bool {
	return !equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		old.Annotations[paasv1.NodeInterfacesAnnotation] != cur.Annotations[paasv1.NodeInterfacesAnnotation]
}
