package nodes

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/fields"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/nodeview"
	"github.com/paas-org/vip-allocator-operator/internal/slimcache"
)

// CacheOptions are the agent's informer cache: every object it reads, with
// the shared transform, but of the Nodes only its own (a field selector on
// the name, as kube-proxy watches its Node). What it reads of the other
// nodes comes from their NodeViews (node_views.go).
func CacheOptions(node string) cache.Options {
	return cache.Options{
		DefaultTransform: slimcache.Transform,
		ByObject: map[client.Object]cache.ByObject{
			&corev1.Node{}: {Field: fields.OneTermEqualSelector("metadata.name", node)},
		},
	}
}

// ViewPublisher keeps the interfaces in this node's NodeView what
// nodeview.Of makes of its Node (nodeview.PublishInterfaces): the part only
// the node knows. The operator creates the view and copies the rest from the
// Node (controllers/nodeview), which the agent may not write:
// what a node's agent says may cost only that node.
type ViewPublisher struct {
	Client   client.Client
	NodeName string
}

// Each agent updates the interfaces of its own node's NodeView only, and
// creates none (the operator does): RBAC cannot say so,
// config/admission/agent_nodeview_writes.yaml does.
// +kubebuilder:rbac:groups=paas.org,resources=nodeviews,verbs=get;list;watch;update

// Reconcile publishes the view of this node's Node (read from the cache, or from
// the API server when publishSelf calls it before the cache runs).
func (p *ViewPublisher) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var node corev1.Node
	if err := p.Client.Get(ctx, client.ObjectKey{Name: p.NodeName}, &node); err != nil {
		return reconcile.Result{}, client.IgnoreNotFound(err)
	}
	return reconcile.Result{}, nodeview.PublishInterfaces(ctx, p.Client, &node)
}

// SetupWithManager runs Reconcile on every change of this node's Node (the
// only one in the cache) and of its view (repaired when someone edits or
// deletes it).
func (p *ViewPublisher) SetupWithManager(mgr ctrl.Manager) error {
	own := predicate.NewPredicateFuncs(func(o client.Object) bool { return o.GetName() == p.NodeName })
	toNode := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: p.NodeName}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeview").
		For(&corev1.Node{}, builder.WithPredicates(own)).
		Watches(&paasv1.NodeView{}, toNode, builder.WithPredicates(own)).
		Complete(p)
}
