package service

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/internal/reserved"
)

// Reserved addresses, the operator's side: the cluster's own addresses (pod
// CIDRs, Service CIDRs, BGPPeers' addresses) and what each Node claims for
// itself (its status.addresses; what its agent publishes: its interface
// addresses, its default gateways, its subnets' network and broadcast
// addresses) are read from the informer cache into the allocator, which never
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

// refreshReserved hands the allocator the current reservations and requeues
// the Services whose conflicts or claims changed, and the waiting ones (a
// reservation that went away may free an address for them).
func (r *Reconciler) refreshReserved(ctx context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
	s := r.state
	s.mu.Lock()
	err := s.syncReserved(ctx, r.Client, r.Reserved)
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
func (a *allocatorState) syncReserved(ctx context.Context, c client.Reader, src *reserved.Source) error {
	rs, err := src.List(ctx, c)
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
func (r *Reconciler) markLedger(ctx context.Context, current []paasv1.IP, conflicts map[netip.Addr]allocator.Reservation) error {
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
		if err := r.Client.Patch(ctx, ip, patch, paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("mark ledger IP %s reserved: %w", ip.Name, err)
		}
		current[i] = *ip
	}
	return nil
}

// conflictEvent tells the Service when a conflict appears, changes or ends.
func (r *Reconciler) conflictEvent(svc *corev1.Service, old *metav1.Condition, cur metav1.Condition, ok bool) {
	switch {
	case ok && (old == nil || old.Message != cur.Message):
		r.Recorder.Event(svc, corev1.EventTypeWarning, EventAddressConflict, cur.Message)
	case !ok && old != nil:
		r.Recorder.Event(svc, corev1.EventTypeNormal, EventAddressConflictResolved, "no address of the Service is reserved elsewhere in the cluster any more; the nodes program and announce it again")
	}
}

// syncReservedIfStale reads the reservations when they were never read or the
// last read failed. Callers hold a.mu.
func (a *allocatorState) syncReservedIfStale(ctx context.Context, c client.Reader, src *reserved.Source) error {
	if !a.reservedStale.Load() {
		return nil
	}
	return a.syncReserved(ctx, c, src)
}
