package controllers

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// Reserved addresses, the operator's side: the cluster's own addresses (Nodes'
// status.addresses, pod CIDRs, Service CIDRs, BGPPeers' addresses) and what
// each Node's agent claims for it (its interface addresses, its default
// gateways, its subnets' network and broadcast addresses) are read from the informer cache into the allocator, which never
// hands one out (internal/allocator/reserved.go). Node and ServiceCIDR events
// refresh them at once and requeue the Services that now hold, or no longer
// hold, a reserved or claimed address (BGPPeer events too). A Service holding a reserved address
// keeps it, its ledger object gets spec.reservedBy (the agents stop
// programming it) and the Service the condition vip.paas.org/AddressConflict
// with an Event. A claimed one is the claiming node's conflict only
// (node_claims.go).

// Event reasons of address conflicts on Services.
const (
	EventAddressConflict         = "AddressConflict"
	EventAddressConflictResolved = "AddressConflictResolved"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=get;list;watch

// ReservedSource reads the cluster's reserved addresses. The Service and
// IPGroup reconcilers share one.
type ReservedSource struct {
	// serviceCIDRs are configured (--service-cidrs) for clusters that serve no
	// networking.k8s.io/v1 ServiceCIDR objects, or to add ranges to them.
	serviceCIDRs []netip.Prefix
	// watchServiceCIDRs is set when the API server serves ServiceCIDR objects.
	watchServiceCIDRs bool
}

// NewReservedSource asks the API server whether it serves ServiceCIDRs
// (Kubernetes 1.33+); configured are reserved besides them.
func NewReservedSource(mgr ctrl.Manager, configured []netip.Prefix) (*ReservedSource, error) {
	s := &ReservedSource{serviceCIDRs: configured}
	_, err := mgr.GetRESTMapper().RESTMapping(networkingv1.SchemeGroupVersion.WithKind("ServiceCIDR").GroupKind(), "v1")
	switch {
	case err == nil:
		s.watchServiceCIDRs = true
	case meta.IsNoMatchError(err):
		mgr.GetLogger().Info("the API server serves no networking.k8s.io/v1 ServiceCIDR; only --service-cidrs are reserved", "serviceCIDRs", configured)
	default:
		// Guessing "not served" would silently hand out ClusterIPs.
		return nil, fmt.Errorf("discover ServiceCIDRs: %w", err)
	}
	return s, nil
}

// list reads the reservations from c (the cache).
func (s *ReservedSource) list(ctx context.Context, c client.Reader) ([]allocator.Reservation, error) {
	var nodes corev1.NodeList // read only: the cache's own, uncopied
	if err := c.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	var cidrs networkingv1.ServiceCIDRList
	if s.watchServiceCIDRs {
		if err := c.List(ctx, &cidrs, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list ServiceCIDRs: %w", err)
		}
	}
	var peers paasv1.BGPPeerList
	if err := c.List(ctx, &peers, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list BGPPeers: %w", err)
	}
	return append(k8salloc.Reservations(nodes.Items, cidrs.Items, s.serviceCIDRs), k8salloc.PeerReservations(peers.Items)...), nil
}

// watch calls refresh on every Node, ServiceCIDR or BGPPeer change that may
// change the reserved addresses.
func (s *ReservedSource) watch(b *ctrl.Builder, refresh func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request])) *ctrl.Builder {
	h := handler.Funcs{
		CreateFunc: func(ctx context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			refresh(ctx, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if reservationsChanged(e.ObjectOld, e.ObjectNew) {
				refresh(ctx, q)
			}
		},
		DeleteFunc: func(ctx context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			refresh(ctx, q)
		},
	}
	b = b.Watches(&corev1.Node{}, h)
	b = b.Watches(&paasv1.BGPPeer{}, h)
	if s.watchServiceCIDRs {
		b = b.Watches(&networkingv1.ServiceCIDR{}, h)
	}
	return b
}

// reservationsChanged reports a change of what a Node or ServiceCIDR reserves;
// status heartbeats are not.
func reservationsChanged(old, cur client.Object) bool {
	if op, ok := old.(*paasv1.BGPPeer); ok {
		return op.Spec.PeerAddress != cur.(*paasv1.BGPPeer).Spec.PeerAddress
	}
	on, ok1 := old.(*corev1.Node)
	cn, ok2 := cur.(*corev1.Node)
	if !ok1 || !ok2 {
		return true // ServiceCIDRs are immutable but for deletion: rare, always refresh
	}
	return !equality.Semantic.DeepEqual(on.Status.Addresses, cn.Status.Addresses) ||
		!slices.Equal(on.Spec.PodCIDRs, cn.Spec.PodCIDRs) ||
		on.Annotations[paasv1.NodeInterfacesAnnotation] != cn.Annotations[paasv1.NodeInterfacesAnnotation]
}

// refreshReserved hands the allocator the current reservations and requeues
// the Services whose conflicts or claims changed, and the waiting ones (a
// reservation that went away may free an address for them).
func (r *ServiceReconciler) refreshReserved(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	s := r.state
	s.mu.Lock()
	err := s.syncReserved(ctx, r.GetClient(), r.Reserved)
	before, after := s.conflicted, s.alloc.Conflicts()
	s.conflicted = after
	claimedBefore, claimedAfter := s.claimed, claimedKeys(s.alloc)
	s.claimed = claimedAfter
	s.mu.Unlock()
	if err != nil {
		logf.FromContext(ctx).Error(err, "read reserved addresses; retried at the next allocation")
		s.reservedStale.Store(true)
		return
	}
	keys := map[string]bool{}
	for key := range before {
		keys[key] = true
	}
	for key := range after {
		keys[key] = true
	}
	maps.Copy(keys, claimedBefore)
	maps.Copy(keys, claimedAfter)
	for key := range keys {
		if svc, ok := ledger.ServiceOfKey(key); ok {
			q.Add(reconcile.Request{NamespacedName: svc})
		}
	}
	for _, req := range r.pendingKeys(func(client.ObjectKey) bool { return true }) {
		q.Add(req)
	}
}

// claimedKeys are the keys holding addresses Nodes claim (node_claims.go).
func claimedKeys(a *allocator.Allocator) map[string]bool {
	out := map[string]bool{}
	for addr := range a.Claims() {
		for _, key := range a.Holders(addr) {
			out[key] = true
		}
	}
	return out
}

// syncReserved reads the reservations into the allocator. Callers hold a.mu.
func (a *allocatorState) syncReserved(ctx context.Context, c client.Reader, src *ReservedSource) error {
	rs, err := src.list(ctx, c)
	if err != nil {
		return err
	}
	a.alloc.SetReserved(rs)
	a.reservedStale.Store(false)
	return nil
}

// addressConflictCondition is the Service's vip.paas.org/AddressConflict
// condition for the reserved addresses it holds; ok is false when it holds none.
func addressConflictCondition(generation int64, conflicts map[netip.Addr]allocator.Reservation) (c metav1.Condition, ok bool) {
	if len(conflicts) == 0 {
		return c, false
	}
	addrs := make([]netip.Addr, 0, len(conflicts))
	for addr := range conflicts {
		addrs = append(addrs, addr)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)
	var parts []string
	for _, addr := range addrs {
		parts = append(parts, fmt.Sprintf("%s is %s", addr, conflicts[addr].Holder))
	}
	c = metav1.Condition{Type: paasv1.ConditionAddressConflict, Status: "True", ObservedGeneration: generation, Reason: conflicts[addrs[0]].Kind,
		Message: strings.Join(parts, "; ") + ": the Service keeps the address but no node programs or announces it; free the address there, or exclude it from the IPGroup to move the Service to another one"}
	return c, true
}

// setAddressConflict sets or removes the condition on status.
func setAddressConflict(conds *[]metav1.Condition, generation int64, conflicts map[netip.Addr]allocator.Reservation) {
	if c, ok := addressConflictCondition(generation, conflicts); ok {
		meta.SetStatusCondition(conds, c)
	} else {
		meta.RemoveStatusCondition(conds, paasv1.ConditionAddressConflict)
	}
}

// reservedBy is the ledger's spec.reservedBy for addr.
func reservedBy(conflicts map[netip.Addr]allocator.Reservation, addr netip.Addr) string {
	if r, ok := conflicts[addr]; ok {
		return r.Holder
	}
	return ""
}

// markLedger writes spec.reservedBy on the Service's ledger objects where it
// changed: the agents read it to stop (or resume) programming the address.
func (r *ServiceReconciler) markLedger(ctx context.Context, current []paasv1.IP, conflicts map[netip.Addr]allocator.Reservation) error {
	for i := range current {
		addr, ok := current[i].Addr()
		if !ok || current[i].Spec.ReservedBy == reservedBy(conflicts, addr) {
			continue
		}
		// A copy: current shares its maps and slices with the cache (ledgerOf),
		// and the patch's answer is decoded into what it patches.
		ip := current[i].DeepCopy()
		patch := client.MergeFrom(&current[i])
		ip.Spec.ReservedBy = reservedBy(conflicts, addr)
		if err := r.GetClient().Patch(ctx, ip, patch, paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("mark ledger IP %s reserved: %w", ip.Name, err)
		}
		current[i] = *ip
	}
	return nil
}

// conflictEvent tells the Service when a conflict appears, changes or ends.
func (r *ServiceReconciler) conflictEvent(svc *corev1.Service, old *metav1.Condition, cur metav1.Condition, ok bool) {
	switch {
	case ok && (old == nil || old.Message != cur.Message):
		r.GetRecorder().Event(svc, corev1.EventTypeWarning, EventAddressConflict, cur.Message)
	case !ok && old != nil:
		r.GetRecorder().Event(svc, corev1.EventTypeNormal, EventAddressConflictResolved, "no address of the Service is reserved elsewhere in the cluster any more; the nodes program and announce it again")
	}
}

// syncReservedIfStale reads the reservations when they were never read or the
// last read failed. Callers hold a.mu.
func (a *allocatorState) syncReservedIfStale(ctx context.Context, c client.Reader, src *ReservedSource) error {
	if !a.reservedStale.Load() {
		return nil
	}
	return a.syncReserved(ctx, c, src)
}
