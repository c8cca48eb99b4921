package controllers

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"strings"
	"time"

	"github.com/redhat-cop/operator-utils/pkg/util"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// statusDelay batches a burst of allocations into one IPGroup status write.
const statusDelay = time.Second

// IPGroupReconciler reports on each IPGroup how full it is, whether its spec is
// usable and whether its segment overlaps another group's.
type IPGroupReconciler struct {
	util.ReconcilerBase
	// Reserved reads the addresses the cluster reserves, counted in status.reserved.
	Reserved *ReservedSource
	// OnCordon is what cordon does to VIPs (the operator's --on-cordon, which
	// the agents it deploys get too): the Announceable condition asks the same.
	OnCordon election.OnCordon
}

// +kubebuilder:rbac:groups=paas.org,resources=ipgroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=paas.org,resources=ipgroups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

func (r *IPGroupReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	group := &paasv1.IPGroup{}
	if err := r.GetClient().Get(ctx, req.NamespacedName, group); err != nil {
		if client.IgnoreNotFound(err) == nil {
			addressesTotal.DeleteLabelValues(req.Name)
			addressesInUse.DeleteLabelValues(req.Name)
			servicesRelocating.DeleteLabelValues(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var groups paasv1.IPGroupList
	if err := r.GetClient().List(ctx, &groups); err != nil {
		return ctrl.Result{}, fmt.Errorf("list IPGroups: %w", err)
	}
	var ledger paasv1.IPList
	if err := r.GetClient().List(ctx, &ledger); err != nil {
		return ctrl.Result{}, fmt.Errorf("list IPs: %w", err)
	}
	var held []netip.Addr
	for i := range ledger.Items {
		if addr, ok := ledger.Items[i].Addr(); ok {
			held = append(held, addr)
		}
	}

	var nodes corev1.NodeList
	if err := r.GetClient().List(ctx, &nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("list Nodes: %w", err)
	}

	reservations, err := r.Reserved.list(ctx, r.GetClient())
	if err != nil {
		return ctrl.Result{}, err
	}

	desired := group.DeepCopy()
	parsed, err := k8salloc.Group(group)
	setCapacity(&desired.Status, parsed, held, reservations)
	desired.Status.Relocating = countRelocating(group.Name, parsed, ledger.Items)
	servicesRelocating.WithLabelValues(group.Name).Set(float64(desired.Status.Relocating))
	setReadyCondition(&desired.Status, group.Generation, parsed, err)
	setOverlappingCondition(&desired.Status, group, groups.Items)
	var peers paasv1.BGPPeerList
	if err := r.GetClient().List(ctx, &peers); err != nil {
		return ctrl.Result{}, fmt.Errorf("list BGPPeers: %w", err)
	}
	setAnnounceableCondition(&desired.Status, group, nodes.Items, peers.Items, r.OnCordon)
	desired.Status.ObservedGeneration = group.Generation
	if parsed != nil {
		total, _ := new(big.Float).SetInt(parsed.Capacity()).Float64()
		addressesTotal.WithLabelValues(group.Name).Set(total)
		addressesInUse.WithLabelValues(group.Name).Set(float64(desired.Status.Allocated))
	}
	if equality.Semantic.DeepEqual(group.Status, desired.Status) {
		return ctrl.Result{}, nil
	}
	if err := r.GetClient().Status().Patch(ctx, desired, client.MergeFrom(group), paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("patch status of IPGroup %s: %w", group.Name, err)
	}
	return ctrl.Result{}, nil
}

// setCapacity counts the group's addresses: usable ones, those held, and
// those reserved in the cluster (available counts neither).
func setCapacity(status *paasv1.IPGroupStatus, g *allocator.Group, held []netip.Addr, reservations []allocator.Reservation) {
	if g == nil {
		status.Capacity, status.Allocated, status.Available, status.Reserved = "", 0, "", ""
		return
	}
	a := allocator.New()
	a.SetGroups([]*allocator.Group{g})
	a.SetReserved(reservations)
	var n, heldReserved int64
	for _, addr := range held {
		if g.Usable(addr) {
			n++
			if _, ok := a.ReservedIn(g, addr); ok {
				heldReserved++ // a conflict: counted as allocated, not twice
			}
		}
	}
	capacity, reserved := g.Capacity(), a.ReservedCount(g)
	status.Capacity = capacity.String()
	status.Allocated = n
	status.Reserved = reserved.String()
	free := new(big.Int).Sub(capacity, big.NewInt(n))
	free.Sub(free, reserved).Add(free, big.NewInt(heldReserved))
	status.Available = free.String()
}

func setReadyCondition(status *paasv1.IPGroupStatus, generation int64, g *allocator.Group, parseErr error) {
	c := metav1.Condition{Type: paasv1.IPGroupReady, ObservedGeneration: generation}
	if parseErr != nil {
		c.Status, c.Reason = metav1.ConditionFalse, "InvalidSpec"
		c.Message = fmt.Sprintf("the group hands out nothing: %v; fix spec", parseErr)
	} else {
		c.Status, c.Reason = metav1.ConditionTrue, "Accepted"
		c.Message = fmt.Sprintf("%s of %s addresses free", status.Available, status.Capacity)
	}
	meta.SetStatusCondition(&status.Conditions, c)
}

// setOverlappingCondition reports the other groups with a part (segment or
// addresses entry) overlapping one of this group's.
func setOverlappingCondition(status *paasv1.IPGroupStatus, group *paasv1.IPGroup, all []paasv1.IPGroup) {
	c := metav1.Condition{Type: paasv1.IPGroupOverlapping, ObservedGeneration: group.Generation,
		Status: metav1.ConditionFalse, Reason: "NoOverlap", Message: "no other IPGroup's segment or addresses overlap this one's"}
	mine, err := k8salloc.Group(group)
	var others []string
	for i := range all {
		other := &all[i]
		if err != nil || other.Name == group.Name {
			continue
		}
		if theirs, perr := k8salloc.Group(other); perr == nil && mine.Overlaps(theirs) {
			others = append(others, fmt.Sprintf("%s (%s)", other.Name, other.Spec.DescribeParts()))
		}
	}
	if len(others) > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, "SegmentOverlaps"
		c.Message = fmt.Sprintf("%s overlaps IPGroup %s; each address is still handed out once, but make the groups disjoint so each address has one group",
			group.Spec.DescribeParts(), strings.Join(others, ", "))
	}
	meta.SetStatusCondition(&status.Conditions, c)
}

// SetupWithManager watches IPGroups (any group's change may change overlaps, so
// all are requeued) and the ledger (counts, batched by statusDelay).
func (r *IPGroupReconciler) SetupWithManager(mgr ctrl.Manager) error {
	allGroups := func(ctx context.Context, _ client.Object) []reconcile.Request {
		var list paasv1.IPGroupList
		if err := mgr.GetClient().List(ctx, &list); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, g := range list.Items {
			out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Name: g.Name}})
		}
		return out
	}
	allGroupsAfter := func(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		for _, req := range allGroups(ctx, nil) {
			q.AddAfter(req, statusDelay)
		}
	}
	groupsHolding := func(ctx context.Context, o client.Object, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
		// The group the ledger names counts the address as relocating when it
		// no longer contains it.
		if name := o.GetLabels()[paasv1.IPGroupLabel]; name != "" {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}, statusDelay)
		}
		addr, ok := o.(*paasv1.IP).Addr()
		if !ok {
			return
		}
		var list paasv1.IPGroupList
		if err := mgr.GetClient().List(ctx, &list); err != nil {
			return
		}
		for _, g := range list.Items {
			if p, err := k8salloc.Group(&g); err == nil && p.Contains(addr) {
				q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: g.Name}}, statusDelay)
			}
		}
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("ipgroup").
		For(&paasv1.IPGroup{}, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&paasv1.IPGroup{}, handler.EnqueueRequestsFromMapFunc(allGroups), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// Nodes: which can announce (labels, cordon, interfaces), batched.
		Watches(&corev1.Node{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				allGroupsAfter(ctx, q)
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				if nodeAnnouncingChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node)) || reservationsChanged(e.ObjectOld, e.ObjectNew) {
					allGroupsAfter(ctx, q)
				}
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				allGroupsAfter(ctx, q)
			},
		}).
		// BGPPeers: which nodes can advertise a BGP group's VIPs.
		Watches(&paasv1.BGPPeer{}, handler.EnqueueRequestsFromMapFunc(allGroups), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&paasv1.IP{}, handler.Funcs{
			CreateFunc: func(ctx context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				groupsHolding(ctx, e.Object, q)
			},
			DeleteFunc: func(ctx context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				groupsHolding(ctx, e.Object, q)
			},
			UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
				// Relabelled to another group (relocation.go): both recount.
				if e.ObjectOld.GetLabels()[paasv1.IPGroupLabel] != e.ObjectNew.GetLabels()[paasv1.IPGroupLabel] {
					groupsHolding(ctx, e.ObjectOld, q)
					groupsHolding(ctx, e.ObjectNew, q)
				}
			},
		})
	if r.Reserved.watchServiceCIDRs {
		// Service CIDRs are reserved: status.reserved counts them.
		b = b.Watches(&networkingv1.ServiceCIDR{}, handler.EnqueueRequestsFromMapFunc(allGroups))
	}
	return b.Complete(r)
}

// nodeAnnouncingChanged reports a change of what decides whether a node can
// announce: labels, cordon, published interfaces. Status heartbeats are not.
func nodeAnnouncingChanged(old, cur *corev1.Node) bool {
	return !equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
		old.Spec.Unschedulable != cur.Spec.Unschedulable ||
		old.Annotations[paasv1.NodeInterfacesAnnotation] != cur.Annotations[paasv1.NodeInterfacesAnnotation]
}
