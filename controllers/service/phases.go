package service

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
)

// A Service this operator serves is reconciled in named phases, in this
// order. Each reads the results of the phases before it from the scope and
// records its own there; a phase that returns done ends the reconcile
// without an error (the Service waits for an event).
//
//  1. ledger: the Service's ledger objects, once stale ones are left and the
//     original operator's owned (original.go), and the finalizers;
//  2. request: what the Service asks for, and the addresses of legacy
//     VirtualIPs migrating to it taken over (virtualip_takeover.go);
//  3. allocation: the allocator's answer, written to the ledger (the create
//     is the lock; a lost race asks again);
//  4. marks: the ledger marks of reserved and claimed addresses, which the
//     agents read before the status shows them (reserved.go, node_claims.go);
//  5. status: the status, its conditions and Events;
//  6. settle: once the status shows the addresses, the ledger objects of
//     those given up are left (relocation.go);
//  7. waiting: whether the Service waits for an address, and waking those
//     that may now get one.

// phase is one named step of a served Service's reconcile.
type phase struct {
	name string
	run  func(context.Context, *scope) (done bool, err error)
}

func (r *Reconciler) phases() []phase {
	return []phase{
		{"ledger", r.reconcileLedger},
		{"request", r.reconcileRequest},
		{"allocation", r.reconcileAllocation},
		{"marks", r.reconcileMarks},
		{"status", r.reconcileStatus},
		{"settle", r.reconcileSettle},
		{"waiting", r.reconcileWaiting},
	}
}

// scope is what one reconcile of a served Service found, phase by phase.
type scope struct {
	svc *corev1.Service
	key types.NamespacedName

	ledger  ledgerResult
	request requestResult
	alloc   allocation
	status  statusResult
}

// ledgerResult is the ledger phase's.
type ledgerResult struct {
	// current are the Service's ledger objects, as the cache holds them.
	current []paasv1.IP
	// unledgered are the addresses its status shows with no ledger object:
	// another load balancer wrote them (status_adoption.go).
	unledgered []netip.Addr
}

// requestResult is the request phase's: what the Service asks for, or why
// its request cannot be read.
type requestResult struct {
	req allocator.Request
	err error
}

// statusResult is the status phase's.
type statusResult struct {
	// shown: the status shows the allocation's addresses (patched, or so already).
	shown bool
}

// serve makes svc hold its addresses: in memory, in the ledger, in its
// status, phase by phase.
func (r *Reconciler) serve(ctx context.Context, svc *corev1.Service) error {
	s := &scope{svc: svc, key: client.ObjectKeyFromObject(svc)}
	for _, p := range r.phases() {
		done, err := p.run(ctx, s)
		if err != nil {
			return fmt.Errorf("%s of Service %s: %w", p.name, s.key, err)
		}
		if done {
			return nil
		}
	}
	return nil
}

func (r *Reconciler) reconcileLedger(ctx context.Context, s *scope) (bool, error) {
	current, err := r.takeLedger(ctx, s.svc)
	if err != nil {
		return false, err
	}
	s.ledger = ledgerResult{current: current,
		unledgered: unledgered(s.svc, current, func(name string) bool { return r.state.ledgerInFlight(name, s.svc.UID) })}
	return false, nil
}

func (r *Reconciler) reconcileRequest(ctx context.Context, s *scope) (bool, error) {
	ns := &corev1.Namespace{} // only its labels are read: the cache's own, uncopied
	if err := r.Client.Get(ctx, types.NamespacedName{Name: s.svc.Namespace}, ns, client.UnsafeDisableDeepCopy); client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("get Namespace %s: %w", s.svc.Namespace, err)
	}
	s.request.req, s.request.err = k8salloc.Request(s.svc, ns.Labels)
	if s.request.err != nil {
		return false, nil // the allocation phase reports it
	}
	return false, r.takeOverFromVirtualIPs(ctx, s.svc, s.request.req)
}

func (r *Reconciler) reconcileAllocation(ctx context.Context, s *scope) (bool, error) {
	for attempt := 0; ; attempt++ {
		s.alloc = r.allocate(ctx, s.key, s.request.req, s.request.err, s.ledger.unledgered, s.ledger.current)
		if leftToItsWriter(s.alloc, s.ledger.unledgered, s.ledger.current) {
			// Waits for an IPGroup (a group event or a freed address wakes it).
			r.setPending(s.key, true)
			return true, nil
		}
		lost, err := r.writeLedger(ctx, s.svc, s.alloc, s.ledger.current)
		if err != nil {
			// The status shows no address without its ledger object: say why it waits.
			r.Recorder.Eventf(s.svc, corev1.EventTypeWarning, EventAllocationFailed, "Cannot record the address in the IP ledger: %v%s", err, webhookHint(err))
			return false, err
		}
		if !lost {
			return false, nil
		}
		// Another holder won the ledger race: the allocator now knows it, try
		// again; the status never shows an address whose ledger object is not ours.
		if attempt == 3 {
			return false, fmt.Errorf("allocate %s: another holder won the ledger race 4 times; retrying", s.key)
		}
	}
}

// reconcileMarks writes first, in the ledger, which addresses the agents
// must leave alone.
func (r *Reconciler) reconcileMarks(ctx context.Context, s *scope) (bool, error) {
	if err := r.markLedger(ctx, s.ledger.current, s.alloc.reserved.conflicts); err != nil {
		return false, err
	}
	return false, r.markClaims(ctx, s.ledger.current, s.alloc.reserved.claims)
}

func (r *Reconciler) reconcileStatus(ctx context.Context, s *scope) (bool, error) {
	shown, err := r.writeStatus(ctx, s.svc, s.alloc)
	s.status.shown = shown
	return false, err
}

func (r *Reconciler) reconcileSettle(ctx context.Context, s *scope) (bool, error) {
	if !s.status.shown {
		return false, nil
	}
	return false, r.settleLedger(ctx, s.svc, s.alloc, s.ledger.current)
}

func (r *Reconciler) reconcileWaiting(_ context.Context, s *scope) (bool, error) {
	r.setPending(s.key, s.alloc.err != nil)
	if s.alloc.freed || s.alloc.lease.reclaimed {
		r.wakePending()
	}
	return false, nil
}

// allocation is the allocation phase's result: the allocator's answer for
// the Service, and apart, what each feature it weighs found.
type allocation struct {
	held    []netip.Addr
	groupOf map[netip.Addr]string // the IPGroup each held address is in, if any
	// err says why the Service holds less than it asked for.
	err error
	// sharingKey is the Service's sharing key, recorded on its ledger objects.
	sharingKey string
	// freed: an address was freed (given up, a lease ended, a sharer
	// changed its ports or key): pending Services may now fit.
	freed bool

	reserved   reservedFindings
	adoption   adoptionFindings
	lease      leaseFindings
	onLAN      onLANFindings
	protection protectionFindings
}

// reservedFindings are the held addresses reserved elsewhere in the cluster
// (reserved.go) and those Nodes claim (node_claims.go).
type reservedFindings struct {
	conflicts map[netip.Addr]allocator.Reservation
	// claims are those nodes' conflicts, not the Service's.
	claims map[netip.Addr][]allocator.Reservation
}

// adoptionFindings are about the addresses the status showed with no ledger
// object (another load balancer wrote them; status_adoption.go).
type adoptionFindings struct {
	// adopted are the held addresses among them: their ledger objects say so.
	adopted []netip.Addr
	// notAdopted are those the Service does not keep, each with why.
	notAdopted map[netip.Addr]string
}

// leaseFindings are about the addresses kept for a Service after it released
// them (leases.go).
type leaseFindings struct {
	// reclaimed: the Service took back an address leased to it; Services
	// waiting for it are told it is in use now.
	reclaimed bool
}

// onLANFindings are about addresses a host on the LAN uses (lan_in_use.go).
type onLANFindings struct {
	// left are the addresses given up because of it, each with who.
	left map[netip.Addr]string
}

// protectionFindings are about addresses a group protects (kept.go).
type protectionFindings struct {
	// kept are the held addresses no group that admits the Service allows,
	// which it keeps because the group the ledger records them in protects
	// them, each with that group.
	kept map[netip.Addr]string
}
