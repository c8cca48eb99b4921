package service

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/internal/ledgerindex"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// Relocation, the operator's side. The allocator decides when a Service moves
// (an IPGroup edit or deletion, or a new request, leaves it holding an address
// its groups no longer allow); the Service reconciler writes a move in this
// order, so that no address has two owners and no Service is ever without one,
// whatever step a crash interrupts:
//
//  1. choose the new address in memory (the allocator);
//  2. create its ledger IP object (AlreadyExists is the lock);
//  3. patch the Service status to the new address (Event IPChanged);
//  4. delete the old address's ledger object (settleLedger), only once the
//     status no longer shows it.
//
// A crash after 2 or 3 leaves both ledger objects, owned by the Service; the
// rebuild imports both and the next Allocate keeps the one it already moved to.

// EventIPChanged is the Event on a Service that moved from one address to another.
const EventIPChanged = "IPChanged"

var relocationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "vip_allocator_relocations_total",
	Help: "Services moved from one address to another (group edit or deletion, or a changed request), by the IPGroup moved to.",
}, []string{"ipgroup"})

func init() { metrics.Registry.MustRegister(relocationsTotal) }

// move is one family's address change of a Service.
type move struct{ from, to netip.Addr }

// addressChanges pairs what a Service's status had with what it holds now, per
// family: a changed address is a move; the rest were allocated or released.
func addressChanges(had, held []netip.Addr) (moves []move, allocated, released []netip.Addr) {
	for _, addr := range held {
		if !slices.Contains(had, addr) {
			allocated = append(allocated, addr)
		}
	}
	for _, addr := range had {
		if slices.Contains(held, addr) {
			continue
		}
		i := slices.IndexFunc(allocated, func(a netip.Addr) bool { return allocator.FamilyOf(a) == allocator.FamilyOf(addr) })
		if i < 0 {
			released = append(released, addr)
			continue
		}
		moves = append(moves, move{from: addr, to: allocated[i]})
		allocated = slices.Delete(allocated, i, i+1)
	}
	return moves, allocated, released
}

// settleLedger runs once the Service's status shows result.held: it deletes the
// Service's ledger objects of addresses it no longer holds (the old side of a
// move) and relabels those now in another group than recorded.
func (r *Reconciler) settleLedger(ctx context.Context, svc *corev1.Service, result allocation, current []paasv1.IP) error {
	var released []paasv1.IP
	for i := range current {
		ip := &current[i]
		addr, ok := ip.Addr()
		if !ok || !slices.Contains(result.held, addr) {
			released = append(released, *ip)
			continue
		}
		if err := r.relabelLedger(ctx, ip, result.groupOf[addr]); err != nil {
			return err
		}
		if err := r.syncLedgerSharingKey(ctx, ip, result.sharingKey); err != nil {
			return err
		}
		if err := r.endHandOver(ctx, svc, ip); err != nil {
			return err
		}
		if err := r.forgetAdoptedNode(ctx, ip); err != nil {
			return err
		}
	}
	return r.leaveLedger(ctx, released, dropUID(svc.UID))
}

// relabelLedger records group on ip when the address is now in another group
// than the ledger says (its group was deleted and another covers it), so the
// ledger and the groups' Relocating counts tell the truth.
func (r *Reconciler) relabelLedger(ctx context.Context, ip *paasv1.IP, group string) error {
	if group == "" || (ip.Labels[paasv1.IPGroupLabel] == group && ip.Spec.IPGroup == group) {
		return nil
	}
	desired := ip.DeepCopy()
	if desired.Labels == nil {
		desired.Labels = map[string]string{}
	}
	desired.Labels[paasv1.IPGroupLabel] = group
	desired.Spec.IPGroup = group
	if err := r.Client.Patch(ctx, desired, client.MergeFrom(ip), paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("relabel ledger IP %s to IPGroup %s: %w", ip.Name, group, err)
	}
	return nil
}

// reportChanges tells in Events what the status patch from had to result changed.
func (r *Reconciler) reportChanges(svc *corev1.Service, had []netip.Addr, result allocation) {
	moves, allocated, released := addressChanges(had, result.held)
	for _, m := range moves {
		if who, inUse := result.onLAN.left[m.from]; inUse {
			r.Recorder.Eventf(svc, corev1.EventTypeWarning, EventAddressInUseOnLAN, "Changed %s → %s (IPGroup %s): %s is in use on the LAN by %s, which answered the probe sent before its first announcement; it was never announced",
				m.from, m.to, result.groupOf[m.to], m.from, who)
		} else {
			r.Recorder.Eventf(svc, corev1.EventTypeNormal, EventIPChanged, "Changed %s → %s (IPGroup %s)", m.from, m.to, result.groupOf[m.to])
		}
		relocationsTotal.WithLabelValues(result.groupOf[m.to]).Inc()
	}
	for _, addr := range allocated {
		r.Recorder.Eventf(svc, corev1.EventTypeNormal, EventIPAllocated, "Allocated %s from IPGroup %s", addr, result.groupOf[addr])
	}
	for _, addr := range released {
		r.Recorder.Eventf(svc, corev1.EventTypeNormal, EventIPReleased, "Released %s", addr)
	}
	for addr, why := range result.adoption.notAdopted {
		r.Recorder.Eventf(svc, corev1.EventTypeWarning, paasv1.EventAddressNotAdopted,
			"The status showed %s, which no ledger object records (another load balancer wrote it); not adopted: %s", addr, why)
	}
}

// servicesAffectedBy maps an IPGroup change (segment, excluded IPs, selectors,
// deletion) to the Services it may move: those holding addresses the ledger
// records as the group's, and those waiting for an address.
func (r *Reconciler) servicesAffectedBy(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, group client.Object) []reconcile.Request {
		out := r.pendingKeys(func(client.ObjectKey) bool { return true })
		ips, err := ledgerindex.OfGroups(ctx, c, group.GetName())
		if err != nil {
			logf.FromContext(ctx).Error(err, "list the ledger of an edited IPGroup; its Services move at their next reconcile", "ipgroup", group.GetName())
			return out
		}
		for _, ip := range ips {
			for _, o := range ledger.Holders(&ip) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKey{Namespace: o.Namespace, Name: o.Name}})
			}
		}
		return out
	}
}

// servicesIn maps a namespace whose labels changed to its Services: groups'
// namespaceSelectors may now admit the waiting ones, or no longer admit the
// addresses others hold.
func (r *Reconciler) servicesIn(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, ns client.Object) []reconcile.Request {
		out := r.pendingKeys(func(k client.ObjectKey) bool { return k.Namespace == ns.GetName() })
		var list corev1.ServiceList
		if err := c.List(ctx, &list, client.InNamespace(ns.GetName())); err != nil {
			logf.FromContext(ctx).Error(err, "list the Services of a relabelled namespace; they move at their next reconcile", "namespace", ns.GetName())
			return out
		}
		for i := range list.Items {
			if lbclass.Handles(&list.Items[i], r.OwnClassOnly) {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&list.Items[i])})
			}
		}
		return out
	}
}
