package nodeview

import (
	"cmp"
	"context"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/nodeview"
)

// DefaultNodeViewGrace is how long the operator leaves a view whose
// interfaces alone are outdated to the node's own agent, which writes them
// within milliseconds of the change if it can: so each such change is
// written once, by the agent.
const DefaultNodeViewGrace = 5 * time.Second

// Reconciler keeps the NodeView of every node what nodeview.Of makes of its
// Node. It creates each view and copies the Node's part (labels, cordon,
// deletion, addresses) at once: agents may not write that part
// (config/admission/agent_nodeview_writes.yaml), and the other agents admit
// a node to gossip only by its view's addresses. A view whose interfaces
// alone are outdated is left to the node's agent for Grace first; after
// that the operator writes them too (an agent of a release without NodeViews
// writes none, and the upgraded agents would otherwise read those Nodes one
// GET at a time: docs/performance.md). Both write the same pure function of
// the Node, so whichever comes second finds nothing to change.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	Grace  time.Duration // 0: DefaultNodeViewGrace

	mu       sync.Mutex
	outdated map[string]time.Time // node name → when its view was first seen outdated
}

// Of the cluster's NodeViews (config/admission/agent_nodeview_writes.yaml lets
// the operator write any of them, each agent only its own node's).
// +kubebuilder:rbac:groups=paas.org,resources=nodeviews,verbs=get;list;watch;create;update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Reconcile writes the NodeView of one Node when it is outdated (see Reconciler).
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var node corev1.Node
	if err := r.Client.Get(ctx, req.NamespacedName, &node); err != nil {
		r.settled(req.Name)
		return ctrl.Result{}, client.IgnoreNotFound(err) // its view goes with it (owner reference)
	}
	stale, err := nodeview.Outdated(ctx, r.Client, &node)
	if err != nil || stale == nodeview.Current {
		r.settled(req.Name)
		return ctrl.Result{}, err
	}
	if stale == nodeview.InterfacesOnly {
		if wait := r.leftToAgent(req.Name, time.Now()); wait > 0 {
			return ctrl.Result{RequeueAfter: wait}, nil
		}
	}
	err = nodeview.Publish(ctx, r.Client, &node)
	if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
		// The agent wrote it after all, and the cache has not caught up: its
		// event brings this back, to find nothing to change.
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, err
}

// leftToAgent is how much longer the outdated view of node is left to its
// agent, counted from when it was first seen outdated.
func (r *Reconciler) leftToAgent(node string, now time.Time) time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.outdated == nil {
		r.outdated = map[string]time.Time{}
	}
	since, seen := r.outdated[node]
	if !seen {
		r.outdated[node], since = now, now
	}
	return max(0, since.Add(cmp.Or(r.Grace, DefaultNodeViewGrace)).Sub(now))
}

// settled forgets that node's view was outdated.
func (r *Reconciler) settled(node string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	delete(r.outdated, node)
}

// SetupWithManager reconciles a Node on each of its changes and on each
// change of its view (an edit or a deletion is repaired).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	sameName := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		return []reconcile.Request{{NamespacedName: client.ObjectKey{Name: o.GetName()}}}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("nodeview").
		For(&corev1.Node{}).
		Watches(&paasv1.NodeView{}, sameName).
		Complete(r)
}
