package service

import (
	"cmp"
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/internal/ledgerindex"
	"github.com/paas-org/vip-allocator-operator/controllers/internal/predicates"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/internal/reserved"
)

// ownerIndex indexes ledger objects by "<namespace>/<name>" of their Service
// (spec.owner, or the owner annotation of the original operator's objects).
const ownerIndex = "spec.owner"

// Event reasons on Services.
const (
	EventIPAllocated      = "IPAllocated"
	EventIPReleased       = "IPReleased"
	EventAllocationFailed = "AllocationFailed"
	// EventAddressKept: the Service keeps an address its IPGroup no longer
	// allows until the group's admin releases it (package ipgroup, protection.go).
	EventAddressKept = "AddressKept"
)

// Reconciler gives LoadBalancer Services addresses from IPGroups and
// records each in the IP ledger. Allocating is: choose in memory, create the
// ledger object (the API server's AlreadyExists is the lock), patch the status,
// and only then delete the ledger objects of addresses it gave up (relocation.go).
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server itself, for what the cache may not show yet.
	APIReader client.Reader
	// Recorder records the Events users read on the objects.
	Recorder record.EventRecorder
	// OwnClassOnly serves only Services of class paas.org/vip-allocator.
	OwnClassOnly bool
	// Workers is the number of Services reconciled at once.
	Workers int
	// LeaderElection tells readiness whether a standby replica may exist.
	LeaderElection bool
	// IPMode written to the ingress: Proxy (the agent forwards VIP traffic) or
	// VIP (kube-proxy or the CNI does). Empty means Proxy.
	IPMode corev1.LoadBalancerIPMode
	// Reserved reads the addresses the cluster reserves (reserved.go).
	Reserved *reserved.Source
	// ReleasedGrace is how long an address a Service asked for by name stays
	// kept for it after the Service released it (leases.go); 0 keeps none.
	ReleasedGrace time.Duration

	state *allocatorState
	queue atomic.Pointer[workqueue.TypedRateLimitingInterface[reconcile.Request]]
	// leaseTimer runs expireLeases when the first lease ends.
	leaseTimer struct {
		sync.Mutex
		t  *time.Timer
		at time.Time
	}
}

// Services are patched (not status) for their finalizers alone here (the
// cleanup finalizer, the original operator's: finalizers.go); the migration
// patches them too (migration/reconciler.go). RBAC cannot narrow a patch to
// those fields: config/admission/operator_service_updates.yaml does. The
// status is only ever patched (statusPatch, the condition), never updated whole.
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups="",resources=services/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=paas.org,resources=ips,verbs=get;list;watch;create;update;patch;delete
// +kubebuilder:rbac:groups=paas.org,resources=ipgroups,verbs=get;list;watch
// +kubebuilder:rbac:groups=paas.org,resources=virtualips;groupsegmentmappings,verbs=get;list;watch

// Reconcile gives one Service its addresses, or releases them, in the phases
// of phases.go.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	if err := r.state.rebuild(ctx, r.Client, r.OwnClassOnly, r.Reserved); err != nil {
		return ctrl.Result{}, err
	}
	svc := &corev1.Service{}
	if err := r.Client.Get(ctx, req.NamespacedName, svc); err != nil {
		if !apierrors.IsNotFound(err) {
			return ctrl.Result{}, fmt.Errorf("get Service %s: %w", req.NamespacedName, err)
		}
		_, err := r.release(ctx, req.NamespacedName, nil, nil)
		return ctrl.Result{}, err
	}
	if !svc.DeletionTimestamp.IsZero() {
		return ctrl.Result{}, r.finishDeletion(ctx, svc)
	}
	if !lbclass.Handles(svc, r.OwnClassOnly) {
		held, err := r.release(ctx, req.NamespacedName, svc, requestedIPs(svc))
		if err != nil {
			return ctrl.Result{}, err
		}
		return ctrl.Result{}, r.dropFinalizers(ctx, svc, held)
	}
	return ctrl.Result{}, r.serve(ctx, svc)
}

// takeLedger returns the ledger entries of svc, once the stale ones of an
// earlier Service of the same name are forgotten and those the original
// operator wrote for it are ours, and puts our finalizer in place of the
// original's.
func (r *Reconciler) takeLedger(ctx context.Context, svc *corev1.Service) ([]paasv1.IP, error) {
	key := client.ObjectKeyFromObject(svc)
	ips, err := r.ledgerOf(ctx, key)
	if err != nil {
		return nil, err
	}
	// Entries of an earlier Service of the same name are garbage; those the
	// original operator wrote for this one become ours.
	current, original, stale := classifyLedger(svc, ips, func(name string) bool { return r.state.ledgerInFlight(name, svc.UID) })
	if err := r.forgetLedger(ctx, key, svc.UID, stale); err != nil {
		return nil, err
	}
	owned, err := r.ownOriginalLedger(ctx, svc, original)
	if err != nil {
		return nil, err
	}
	current = append(current, owned...)
	// The ledger is ours now: the original's finalizer would only hang a
	// deletion. Ours holds the Service until its addresses are released.
	if err := r.dropFinalizer(ctx, svc, paasv1.OriginalServiceFinalizer); err != nil {
		return nil, err
	}
	if err := r.addFinalizer(ctx, svc, CleanupFinalizer); err != nil {
		return nil, err
	}
	return current, nil
}

// shown are the status's addresses without a ledger object: adopted when
// allowed. ledger are the Service's ledger objects: the groups they record
// keep the addresses they no longer allow for it.
func (r *Reconciler) allocate(ctx context.Context, key types.NamespacedName, req allocator.Request, requestErr error, shown []netip.Addr, ips []paasv1.IP) allocation {
	s := r.state
	s.mu.Lock()
	defer s.mu.Unlock()
	before := s.alloc.Held(key.String())
	var out allocation
	if err := s.syncGroups(ctx, r.Client); err != nil {
		out.held, out.err = before, err
	} else if err := s.syncReservedIfStale(ctx, r.Client, r.Reserved); err != nil {
		// Never hand out an address without knowing what is reserved.
		out.held, out.err = before, err
	} else if requestErr != nil {
		out.held, out.err = before, requestErr
	} else {
		// A lease that ended frees an address pending Services may now fit.
		out.freed = len(s.alloc.ExpireLeases(time.Now())) > 0
		shared := s.alloc.SharingOf(key.String())
		assignUnledgered(s.alloc, key.String(), shown, req.Sharing)
		before = s.alloc.Held(key.String())
		leased := leasedTo(s.alloc, key.String(), req.IPs)
		req.Keep = keptAddresses(ips, s.protection, req)
		out.held, out.err = s.alloc.Allocate(key.String(), req)
		out.onLAN.left = s.leftInUseOnLAN(before, out.held)
		out.protection.kept = keptOf(s.alloc, out.held, ips, req)
		out.lease.reclaimed = slices.ContainsFunc(leased, func(a netip.Addr) bool { return slices.Contains(out.held, a) })
		out.sharingKey = req.Sharing.Key
		// A sharer that dropped a port or changed its key may let a pending
		// Service of its key in.
		out.freed = out.freed || shared.Shares() && (shared.Key != req.Sharing.Key || !slices.Equal(shared.Ports, req.Sharing.Ports))
	}
	out.adoption.notAdopted = notAdopted(s.alloc, key, shown, out.held, req, requestErr)
	for _, addr := range shown {
		if slices.Contains(out.held, addr) {
			out.adoption.adopted = append(out.adoption.adopted, addr)
		}
	}
	out.freed = out.freed || len(slices.DeleteFunc(before, func(a netip.Addr) bool { return slices.Contains(out.held, a) })) > 0
	out.groupOf = map[netip.Addr]string{}
	out.reserved.conflicts = map[netip.Addr]allocator.Reservation{}
	out.reserved.claims = map[netip.Addr][]allocator.Reservation{}
	for _, addr := range out.held {
		out.groupOf[addr] = groupOf(s.alloc, addr)
		if res, ok := s.alloc.Reserved(addr); ok {
			out.reserved.conflicts[addr] = res
		}
		if claims := s.alloc.ClaimsOf(addr); len(claims) > 0 {
			out.reserved.claims[addr] = claims
		}
	}
	return out
}

// keptOf are the addresses of held that req.Keep kept: no group that admits
// the Service allows them. Each maps to the group its ledger object records.
func keptOf(a *allocator.Allocator, held []netip.Addr, ips []paasv1.IP, req allocator.Request) map[netip.Addr]string {
	var out map[netip.Addr]string
	for _, addr := range held {
		if !slices.Contains(req.Keep, addr) || a.Allows(addr, req) {
			continue
		}
		if out == nil {
			out = map[netip.Addr]string{}
		}
		for i := range ips {
			if got, ok := ips[i].Addr(); ok && got == addr {
				out[addr] = ips[i].Labels[paasv1.IPGroupLabel]
			}
		}
	}
	return out
}

// groupOf names the first group (by priority) that may hand out addr.
func groupOf(a *allocator.Allocator, addr netip.Addr) string {
	for _, g := range a.Groups() {
		if g.Usable(addr) {
			return g.Name
		}
	}
	return ""
}

// writeLedger creates the ledger objects of the held addresses; settleLedger
// deletes the Service's others once its status no longer shows them. lost is
// true when another holder already had an address.
func (r *Reconciler) writeLedger(ctx context.Context, svc *corev1.Service, result allocation, current []paasv1.IP) (lost bool, err error) {
	have := map[string]bool{}
	for _, ip := range current {
		have[ip.Name] = true
	}
	for _, addr := range result.held {
		if name := paasv1.IPObjectName(addr); have[name] || r.state.ledgerInFlight(name, svc.UID) {
			continue
		}
		won, err := r.createLedger(ctx, svc, addr, result)
		if err != nil {
			return false, err
		}
		lost = lost || !won
	}
	return lost, nil
}

// createLedger creates the ledger object of addr for svc. won is false when the
// address turns out to be held by someone else; the allocator then learns it.
// The outcome says the address's group, whether it is reserved elsewhere, the
// Service's sharing key and whether another load balancer wrote it into the
// status (adopted, status_adoption.go). An object the allocator lets svc share
// is joined instead (ledger_sharing.go).
func (r *Reconciler) createLedger(ctx context.Context, svc *corev1.Service, addr netip.Addr, result allocation) (won bool, err error) {
	group, reserved, sharingKey := result.groupOf[addr], reservedBy(result.reserved.conflicts, addr), result.sharingKey
	owner := &paasv1.IPOwner{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}
	ip := &paasv1.IP{}
	ip.Name = paasv1.IPObjectName(addr)
	ip.Annotations = map[string]string{paasv1.OwnerAnnotation: svc.Namespace + "/" + svc.Name}
	adopted := slices.Contains(result.adoption.adopted, addr)
	if adopted {
		ip.Annotations[paasv1.AdoptedAnnotation] = time.Now().UTC().Format(time.RFC3339)
	}
	awaiting := adopted && awaitsDataPath(r.ipMode(), svc, addr)
	if group != "" {
		ip.Labels = map[string]string{paasv1.IPGroupLabel: group}
	}
	ip.Spec = paasv1.IPSpec{Address: addr.String(), IPGroup: group, Owner: owner, ReservedBy: reserved, SharingKey: sharingKey, AwaitingDataPath: awaiting}
	if adopted {
		ip.Spec.AdoptedFromNode = r.adoptedFromNode(ctx, svc)
	}
	err = r.Client.Create(ctx, ip, paasv1.FieldOwner)
	if err == nil {
		r.state.ledgerCreated(ip.Name, svc.UID, ip.ResourceVersion)
		allocationsTotal.WithLabelValues(group).Inc()
		return true, nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return false, fmt.Errorf("create ledger IP %s for %s/%s: %w", ip.Name, svc.Namespace, svc.Name, err)
	}
	existing := &paasv1.IP{}
	if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ip), existing); err != nil {
		// Deleted in between: the next reconcile creates it.
		return false, fmt.Errorf("get ledger IP %s: %w", ip.Name, err)
	}
	if ledger.HeldBy(existing, svc.UID) {
		return true, nil // ours; the cache had not seen it yet
	}
	if ledger.IsLANRecord(existing) {
		return false, r.meetRecord(ctx, addr, existing)
	}
	if sharingKey != "" && r.mayJoin(client.ObjectKeyFromObject(svc).String(), addr, existing) {
		return true, r.joinLedger(ctx, svc, existing, sharingKey)
	}
	r.state.mu.Lock()
	r.state.alloc.ReleaseAddr(addr)
	for _, key := range ledger.HolderKeys(existing) {
		_ = r.state.alloc.Assign(key, addr)
	}
	if len(ledger.HolderKeys(existing)) == 0 {
		_ = r.state.alloc.Assign(ledger.OwnerKey(existing), addr)
	}
	r.state.mu.Unlock()
	return false, nil
}

// forgetLedger drops key from stale ledger entries (an earlier Service of the
// same name, uid no longer live), in memory too; other holders of a shared
// address keep it.
func (r *Reconciler) forgetLedger(ctx context.Context, key types.NamespacedName, live types.UID, ips []paasv1.IP) error {
	if len(ips) == 0 {
		return nil
	}
	r.state.mu.Lock()
	for _, ip := range ips {
		if addr, ok := ip.Addr(); ok {
			r.state.alloc.Leave(key.String(), addr)
		}
	}
	r.state.mu.Unlock()
	return r.leaveLedger(ctx, ips, dropStale(key, live))
}

// ledgerOf is the ledger objects key holds, as the cache holds them: not
// copied (every allocation reads them, and the copies would be a large part
// of what it allocates), so they share their maps and slices with the cache,
// and whoever writes one writes a DeepCopy of it.
func (r *Reconciler) ledgerOf(ctx context.Context, key types.NamespacedName) ([]paasv1.IP, error) {
	var list paasv1.IPList
	if err := r.Client.List(ctx, &list, client.MatchingFields{ownerIndex: key.String()}, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list ledger of %s: %w", key, err)
	}
	return list.Items, nil
}

// writeStatus patches the Service's ingress and condition when they changed, and
// tells what happened in Events. shown is true when the status now holds
// result.held (patched, or already so).
func (r *Reconciler) writeStatus(ctx context.Context, svc *corev1.Service, result allocation) (shown bool, err error) {
	key := client.ObjectKeyFromObject(svc)
	if r.state.staleStatus(key, svc.ResourceVersion) {
		return false, nil // our last patch is on its way; its watch event reconciles again
	}
	cond := ipAllocatedCondition(svc, result.held, func(a netip.Addr) string { return result.groupOf[a] }, result.err)
	setKept(&cond, result.protection.kept)
	anns, err := r.announcements(ctx, result.held, result.groupOf)
	if err != nil {
		return false, err
	}
	desired := svc.DeepCopy()
	desired.Status.LoadBalancer.Ingress = ingressOf(svc, result.held, r.ipMode(), anns)
	meta.SetStatusCondition(&desired.Status.Conditions, cond)
	setAddressConflict(&desired.Status.Conditions, svc.Generation, result.reserved.conflicts)
	announced, ok := announcedCondition(svc.Generation, anns)
	if ok {
		meta.SetStatusCondition(&desired.Status.Conditions, announced)
	} else {
		meta.RemoveStatusCondition(&desired.Status.Conditions, paasv1.ConditionAnnounced)
	}
	if equality.Semantic.DeepEqual(svc.Status, desired.Status) {
		return true, nil
	}
	patch, err := statusPatch(svc, desired)
	if err != nil {
		return false, err
	}
	if err := r.Client.Status().Patch(ctx, desired, patch, paasv1.FieldOwner); err != nil {
		return false, fmt.Errorf("patch status of Service %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	r.state.statusPatched(key, svc.ResourceVersion)
	r.reportChanges(svc, k8salloc.IngressAddrs(svc), result)
	conflict, inConflict := addressConflictCondition(svc.Generation, result.reserved.conflicts)
	r.conflictEvent(svc, meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionAddressConflict), conflict, inConflict)
	if ok {
		r.announcerEvent(svc, meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionAnnounced), announced)
	}
	if old := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionIPAllocated); cond.Reason == paasv1.ReasonAddressKept && (old == nil || old.Message != cond.Message) {
		r.Recorder.Event(svc, corev1.EventTypeWarning, EventAddressKept, cond.Message)
	}
	if old := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionIPAllocated); cond.Status == "False" && (old == nil || old.Message != cond.Message) {
		allocationFailures.WithLabelValues(cond.Reason).Inc()
		r.Recorder.Event(svc, corev1.EventTypeWarning, EventAllocationFailed, cond.Message)
	}
	return true, nil
}

// statusPatch is the JSON merge patch from svc's status to desired's: what
// client.MergeFrom(svc) computes from the whole objects, written directly. A
// Service's status is its ingress list and its conditions, and a merge patch
// replaces a list whole (null removes it), so the patch is each list that
// changed. Every allocation writes one, so it is built from the two statuses
// rather than by marshalling and diffing two whole Services, which would cost
// the operator a visible share of its CPU (docs/performance.md).
func statusPatch(svc, desired *corev1.Service) (client.Patch, error) {
	status := map[string]any{}
	if ingress := desired.Status.LoadBalancer.Ingress; !equality.Semantic.DeepEqual(svc.Status.LoadBalancer.Ingress, ingress) {
		status["loadBalancer"] = map[string]any{"ingress": nilIfEmpty(ingress)}
	}
	if conditions := desired.Status.Conditions; !equality.Semantic.DeepEqual(svc.Status.Conditions, conditions) {
		status["conditions"] = nilIfEmpty(conditions)
	}
	patch, err := json.Marshal(map[string]any{"status": status})
	if err != nil {
		return nil, fmt.Errorf("status patch: %w", err)
	}
	return client.RawPatch(types.MergePatchType, patch), nil
}

// nilIfEmpty is list, or JSON null (in a merge patch: remove it) when empty.
func nilIfEmpty[T any](list []T) any {
	if len(list) == 0 {
		return nil
	}
	return list
}

// release frees what key holds: memory, ledger, and, when the Service still
// exists but is no longer ours to serve, the addresses and condition in its status.
// Of the addresses it frees, those in requested (what the Service asked for
// by name) stay kept for key for the grace (leases.go). held says whether key
// held any address here.
func (r *Reconciler) release(ctx context.Context, key types.NamespacedName, svc *corev1.Service, requested []netip.Addr) (held bool, err error) {
	until := r.leaseUntil(time.Now())
	r.state.mu.Lock()
	freed := r.state.alloc.ReleaseRequested(key.String(), requested, until)
	r.state.mu.Unlock()
	if !until.IsZero() && len(freed) > 0 {
		r.scheduleLeaseExpiry(until)
	}
	r.setPending(key, false)
	r.state.forget(key)
	ips, err := r.ledgerOf(ctx, key)
	if err != nil {
		return false, err
	}
	for _, ip := range ips {
		if addr, ok := ip.Addr(); ok && !slices.Contains(freed, addr) {
			freed = append(freed, addr)
		}
	}
	if err := r.leaveLedger(ctx, ips, dropName(key)); err != nil {
		return false, err
	}
	held = len(freed) > 0
	if held {
		r.wakePending()
	}
	if svc == nil {
		return held, nil
	}
	desired := svc.DeepCopy()
	desired.Status.LoadBalancer.Ingress = slices.DeleteFunc(desired.Status.LoadBalancer.Ingress, func(in corev1.LoadBalancerIngress) bool {
		addr, err := netip.ParseAddr(in.IP)
		return err == nil && slices.Contains(freed, addr)
	})
	meta.RemoveStatusCondition(&desired.Status.Conditions, paasv1.ConditionIPAllocated)
	meta.RemoveStatusCondition(&desired.Status.Conditions, paasv1.ConditionAddressConflict)
	if equality.Semantic.DeepEqual(svc.Status, desired.Status) {
		return held, nil
	}
	if err := r.Client.Status().Patch(ctx, desired, client.MergeFrom(svc), paasv1.FieldOwner); err != nil {
		return held, fmt.Errorf("clear status of Service %s: %w", key, err)
	}
	if held {
		r.Recorder.Eventf(svc, corev1.EventTypeNormal, EventIPReleased, "Released %s: the Service is no longer a LoadBalancer served by vip-allocator", ingress.Join(freed))
	}
	return held, nil
}

// ipMode is the ipMode the status gives the Services' addresses (adoption_handover.go: an
// adopted address waits for it).
func (r *Reconciler) ipMode() corev1.LoadBalancerIPMode {
	return cmp.Or(r.IPMode, corev1.LoadBalancerIPModeProxy)
}

// setPending records whether key waits for something to change.
func (r *Reconciler) setPending(key types.NamespacedName, pending bool) {
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	if pending {
		r.state.pending[key] = struct{}{}
	} else {
		delete(r.state.pending, key)
	}
}

func (r *Reconciler) pendingKeys(match func(types.NamespacedName) bool) []reconcile.Request {
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	var out []reconcile.Request
	for key := range r.state.pending {
		if match(key) {
			out = append(out, reconcile.Request{NamespacedName: key})
		}
	}
	return out
}

// wakePending requeues the Services waiting for an address: one was just freed.
func (r *Reconciler) wakePending() {
	q := r.queue.Load()
	if q == nil {
		return
	}
	for _, req := range r.pendingKeys(func(types.NamespacedName) bool { return true }) {
		(*q).Add(req)
	}
}

// SetupWithManager registers the controller, the ledger index and the readiness
// check that opens once the allocator is rebuilt.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.state = newAllocatorState()
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &paasv1.IP{}, ownerIndex, func(o client.Object) []string {
		return ledger.HolderKeys(o.(*paasv1.IP))
	}); err != nil {
		return fmt.Errorf("index IPs by owner: %w", err)
	}
	if err := ledgerindex.IndexByGroup(mgr); err != nil {
		return err
	}
	if err := mgr.AddReadyzCheck("allocator", healthz.Checker(r.state.ReadyCheck(r.LeaderElection, mgr.Elected()))); err != nil {
		return err
	}
	serviceStates.source.Store(&serviceStateSource{reader: mgr.GetCache(), ownClassOnly: r.OwnClassOnly, leading: mgr.Elected()})
	// Rebuild as soon as this replica leads, not at the first Service event.
	if err := mgr.Add(rebuildOnStart{r}); err != nil {
		return err
	}
	ledgerOwner := func(_ context.Context, o client.Object) []reconcile.Request {
		ip := o.(*paasv1.IP)
		settled := r.state.ledgerSeen(ip) // an object owned (original.go), relabelled (virtualip_takeover.go) or joined is seen once it shows its holder
		var out []reconcile.Request
		for _, holder := range ledger.ServiceNames(ip) {
			if !slices.Contains(settled, holder) {
				out = append(out, reconcile.Request{NamespacedName: holder})
			}
		}
		return out
	}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("service").
		For(&corev1.Service{}).
		Watches(&paasv1.IP{}, handler.EnqueueRequestsFromMapFunc(r.markInUseOnLAN(mgr.GetClient(), ledgerOwner))).
		Watches(&paasv1.IPGroup{}, handler.EnqueueRequestsFromMapFunc(r.servicesAffectedBy(mgr.GetClient())), builder.WithPredicates(predicates.IPGroupChanged)).
		Watches(&corev1.Namespace{}, handler.EnqueueRequestsFromMapFunc(r.servicesIn(mgr.GetClient())), builder.WithPredicates(predicate.LabelChangedPredicate{})).
		WatchesRawSource(source.Func(func(_ context.Context, q workqueue.TypedRateLimitingInterface[reconcile.Request]) error {
			r.queue.Store(&q)
			return nil
		})).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Workers, 1)})
	return r.Reserved.Watch(b, r.refreshReserved).Complete(r)
}

// rebuildOnStart rebuilds the allocator once the caches are synced and this
// replica is the leader.
type rebuildOnStart struct{ r *Reconciler }

func (s rebuildOnStart) Start(ctx context.Context) error {
	if err := s.r.state.rebuild(ctx, s.r.Client, s.r.OwnClassOnly, s.r.Reserved); err != nil {
		// Reconciles retry it before they allocate anything.
		ctrl.LoggerFrom(ctx).Error(err, "rebuild at start")
	}
	return nil
}
