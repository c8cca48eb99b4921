package ipgroup

import (
	"context"
	"fmt"
	"math/big"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/internal/ledgerindex"
	"github.com/paas-org/vip-allocator-operator/controllers/internal/predicates"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/internal/reserved"
)

// statusDelay batches a burst of allocations into one IPGroup status write.
const statusDelay = time.Second

// Reconciler reports on each IPGroup how full it is, whether its spec is
// usable, whether its segment overlaps another group's and which Services keep
// addresses it no longer allows; it protects a group from which Services hold
// addresses with a finalizer (protection.go).
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server itself, for what the cache may not show yet.
	APIReader client.Reader
	// Reserved reads the addresses the cluster reserves, counted in status.reserved.
	Reserved *reserved.Source
	// OnCordon is what cordon does to VIPs (the operator's --on-cordon, which
	// the agents it deploys get too): the Announceable condition asks the same.
	OnCordon election.OnCordon

	catalog *groupCatalog
}

// +kubebuilder:rbac:groups=paas.org,resources=ipgroups,verbs=get;list;watch;patch
// +kubebuilder:rbac:groups=paas.org,resources=ipgroups/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=paas.org,resources=ipgroups/finalizers,verbs=update
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch

// Reconcile writes one IPGroup's status: its parsed pool, what is allocated
// and its conditions.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	group := &paasv1.IPGroup{}
	if err := r.Client.Get(ctx, req.NamespacedName, group); err != nil {
		if client.IgnoreNotFound(err) == nil {
			addressesTotal.DeleteLabelValues(req.Name)
			addressesInUse.DeleteLabelValues(req.Name)
			servicesRelocating.DeleteLabelValues(req.Name)
		}
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	seen, err := r.observe(ctx, group)
	if err != nil {
		return ctrl.Result{}, err
	}
	step, kept := decideProtection(protectionOf(group, seen.parsed, seen.own), group.Generation)
	if err := r.protect(ctx, group, step); err != nil {
		return ctrl.Result{}, err
	}
	if step == finalizerRemove {
		return ctrl.Result{}, nil // gone, or still held: requeued
	}

	var nodes corev1.NodeList // read only: the cache's own, uncopied
	if err := r.Client.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list Nodes: %w", err)
	}
	reservations, err := r.Reserved.List(ctx, r.Client)
	if err != nil {
		return ctrl.Result{}, err
	}
	var peers paasv1.BGPPeerList
	if err := r.Client.List(ctx, &peers, client.UnsafeDisableDeepCopy); err != nil {
		return ctrl.Result{}, fmt.Errorf("list BGPPeers: %w", err)
	}

	desired := group.DeepCopy()
	setCapacity(&desired.Status, seen.parsed, seen.counts, reservations)
	desired.Status.Relocating = countRelocating(group.Name, usableUnlessDeleting(group, seen.parsed), seen.own)
	servicesRelocating.WithLabelValues(group.Name).Set(float64(desired.Status.Relocating))
	setReadyCondition(&desired.Status, group.Generation, seen.parsed, seen.parseErr)
	setOverlappingCondition(&desired.Status, group, seen.parseErr, seen.overlapping, seen.described)
	setAnnounceableCondition(&desired.Status, group, nodes.Items, peers.Items, r.OnCordon)
	setReturnPathCondition(&desired.Status, group, nodes.Items, peers.Items, r.OnCordon)
	setLANHostAnswersManyCondition(&desired.Status, group.Generation, seen.parsed, seen.counts)
	meta.SetStatusCondition(&desired.Status.Conditions, kept)
	desired.Status.ObservedGeneration = group.Generation
	if seen.parsed != nil {
		total, _ := new(big.Float).SetInt(seen.parsed.Capacity()).Float64()
		addressesTotal.WithLabelValues(group.Name).Set(total)
		addressesInUse.WithLabelValues(group.Name).Set(float64(desired.Status.Allocated))
	}
	if equality.Semantic.DeepEqual(group.Status, desired.Status) {
		return ctrl.Result{}, nil
	}
	if err := r.Client.Status().Patch(ctx, desired, client.MergeFrom(group), paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("patch status of IPGroup %s: %w", group.Name, err)
	}
	return ctrl.Result{}, nil
}

// groupSeen is what one reconcile reads about a group besides the cluster's
// nodes, peers and reservations.
type groupSeen struct {
	parsed      *allocator.Group
	parseErr    error
	overlapping []string          // groups whose segments overlap this one's
	described   map[string]string // each overlapping group's segments, for the condition
	own         []paasv1.IP       // the ledger objects labelled with this group
	counts      ledgerCounts      // the ledger objects inside the group's segments
}

// observe reads the group through the catalog and its ledger objects, together
// with those that may hold its addresses under another label: an overlapping
// group's, the original operator's.
func (r *Reconciler) observe(ctx context.Context, group *paasv1.IPGroup) (groupSeen, error) {
	var seen groupSeen
	r.catalog.observe(group)
	if err := r.catalog.query(ctx, r.Client, func() {
		seen.parsed, seen.parseErr = r.catalog.parsed(group)
		seen.overlapping = r.catalog.groupsOverlapping(seen.parsed, group.Name)
		seen.described = map[string]string{}
		for _, name := range seen.overlapping {
			seen.described[name] = r.catalog.describe(name)
		}
	}); err != nil {
		return seen, err
	}
	own, err := ledgerindex.OfGroups(ctx, r.Client, group.Name)
	if err != nil {
		return seen, err
	}
	others, err := ledgerindex.OfGroups(ctx, r.Client, append(seen.overlapping, ledgerindex.Unlabelled)...)
	if err != nil {
		return seen, err
	}
	seen.own = own
	seen.counts = countLedger(seen.parsed, own, others)
	return seen, nil
}

// usableUnlessDeleting is parsed, or nil (it allows nothing) when the group
// is being deleted.
func usableUnlessDeleting(group *paasv1.IPGroup, parsed *allocator.Group) *allocator.Group {
	if !group.DeletionTimestamp.IsZero() {
		return nil
	}
	return parsed
}

// protect adds or removes the group's AddressesHeldFinalizer. Before removing
// it, the API server (not the cache, which may not show an address allocated
// a moment ago) must confirm that no ledger object names the group.
func (r *Reconciler) protect(ctx context.Context, group *paasv1.IPGroup, step finalizerStep) error {
	switch step {
	case finalizerAdd:
		desired := group.DeepCopy()
		desired.Finalizers = append(desired.Finalizers, paasv1.AddressesHeldFinalizer)
		if err := r.Client.Patch(ctx, desired, client.MergeFromWithOptions(group, client.MergeFromWithOptimisticLock{}), paasv1.FieldOwner); err != nil {
			return fmt.Errorf("add finalizer %s to IPGroup %s: %w", paasv1.AddressesHeldFinalizer, group.Name, err)
		}
		group.Finalizers, group.ResourceVersion = desired.Finalizers, desired.ResourceVersion
	case finalizerRemove:
		var live paasv1.IPList
		if err := r.APIReader.List(ctx, &live, client.MatchingLabels{paasv1.IPGroupLabel: group.Name}); err != nil {
			return fmt.Errorf("confirm IPGroup %s holds no address: %w", group.Name, err)
		}
		for i := range live.Items {
			ip := &live.Items[i]
			if !ledger.IsLANRecord(ip) {
				return fmt.Errorf("IPGroup %s: the ledger still records %s as its own; the cache is behind", group.Name, ip.Name)
			}
			// A record of an address in use on the LAN holds no Service. It
			// means something only while its group exists: no node is elected
			// to probe it again once the group is gone, so it goes with it.
			if !group.DeletionTimestamp.IsZero() {
				if err := r.Client.Delete(ctx, ip, client.Preconditions{UID: &ip.UID}); client.IgnoreNotFound(err) != nil {
					return fmt.Errorf("delete %s, the LAN record of deleted IPGroup %s: %w", ip.Name, group.Name, err)
				}
			}
		}
		i := slices.Index(group.Finalizers, paasv1.AddressesHeldFinalizer)
		patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`, i, paasv1.AddressesHeldFinalizer, i)
		if err := r.Client.Patch(ctx, group.DeepCopy(), client.RawPatch(types.JSONPatchType, []byte(patch)), paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove finalizer %s from IPGroup %s: %w", paasv1.AddressesHeldFinalizer, group.Name, err)
		}
	}
	return nil
}

// ledgerCounts are the group's ledger objects as its status counts them.
type ledgerCounts struct {
	// held are the addresses Services (or legacy VirtualIPs) hold; records
	// those no one holds that are kept as records of a host on the LAN using
	// them (lanRecord).
	held, records []netip.Addr
	// inUseOnLAN counts the group's addresses a host on the LAN answered for,
	// and onLANBy names the MAC that answered for each.
	inUseOnLAN int64
	onLANBy    map[netip.Addr]string
}

// countLedger reads the ledger objects that may hold g's addresses (g nil: a
// group that hands out nothing, which counts no address in use on the LAN).
func countLedger(g *allocator.Group, ledgers ...[]paasv1.IP) ledgerCounts {
	var out ledgerCounts
	for _, ip := range ledgers {
		for i := range ip {
			addr, ok := ip[i].Addr()
			if !ok {
				continue
			}
			if c, inUse := ip[i].InUseOnLAN(); inUse && g != nil && g.Usable(addr) {
				out.inUseOnLAN++
				if out.onLANBy == nil {
					out.onLANBy = map[netip.Addr]string{}
				}
				out.onLANBy[addr], _, _ = strings.Cut(c.Message, " ")
			}
			if ledger.IsLANRecord(&ip[i]) {
				out.records = append(out.records, addr)
			} else {
				out.held = append(out.held, addr)
			}
		}
	}
	return out
}

// setCapacity counts the group's addresses: usable ones, those held, those
// in use on the LAN and those reserved in the cluster (available counts none
// of the last three).
func setCapacity(status *paasv1.IPGroupStatus, g *allocator.Group, counts ledgerCounts, reservations []allocator.Reservation) {
	status.InUseOnLAN = counts.inUseOnLAN
	if g == nil {
		status.Capacity, status.Allocated, status.Available, status.Reserved = "", 0, "", ""
		return
	}
	a := allocator.New()
	a.SetGroups([]*allocator.Group{g})
	a.SetReserved(reservations)
	var n, taken int64 // taken: held or recorded, and not reserved (counted there)
	for _, addr := range counts.held {
		if g.Usable(addr) {
			n++
			if _, ok := a.ReservedIn(g, addr); !ok {
				taken++
			}
		}
	}
	for _, addr := range counts.records {
		if _, ok := a.ReservedIn(g, addr); g.Usable(addr) && !ok {
			taken++
		}
	}
	capacity, reserved := g.Capacity(), a.ReservedCount(g)
	status.Capacity = capacity.String()
	status.Allocated = n
	status.Reserved = reserved.String()
	free := new(big.Int).Sub(capacity, big.NewInt(taken))
	status.Available = free.Sub(free, reserved).String()
}

func setReadyCondition(status *paasv1.IPGroupStatus, generation int64, _ *allocator.Group, parseErr error) {
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

// setOverlappingCondition reports the other groups (overlapping, each with
// its parts as described) with a part overlapping one of this group's.
func setOverlappingCondition(status *paasv1.IPGroupStatus, group *paasv1.IPGroup, parseErr error, overlapping []string, described map[string]string) {
	c := metav1.Condition{Type: paasv1.IPGroupOverlapping, ObservedGeneration: group.Generation,
		Status: metav1.ConditionFalse, Reason: "NoOverlap", Message: "no other IPGroup's segment or addresses overlap this one's"}
	var others []string
	for _, name := range overlapping {
		if parseErr == nil {
			others = append(others, fmt.Sprintf("%s (%s)", name, described[name]))
		}
	}
	if len(others) > 0 {
		c.Status, c.Reason = metav1.ConditionTrue, "SegmentOverlaps"
		c.Message = fmt.Sprintf("%s overlaps IPGroup %s; each address is still handed out once, but make the groups disjoint so each address has one group",
			group.Spec.DescribeParts(), strings.Join(others, ", "))
	}
	meta.SetStatusCondition(&status.Conditions, c)
}

// SetupWithManager watches IPGroups (a group's change requeues the groups it
// overlaps, before or after), Nodes (a Node's change, the groups it may
// announce or reserves addresses of), BGPPeers (the BGP groups) and the
// ledger (the group an address is recorded in and the groups holding it),
// the last three batched by statusDelay.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	r.catalog = newGroupCatalog()
	if err := ledgerindex.IndexByGroup(mgr); err != nil {
		return err
	}
	ev := groupEvents{r: r, c: mgr.GetClient()}
	b := ctrl.NewControllerManagedBy(mgr).
		Named("ipgroup").
		For(&paasv1.IPGroup{}, builder.WithPredicates(predicates.IPGroupChanged)).
		Watches(&paasv1.IPGroup{}, ev.groups()).
		// Nodes: which can announce (labels, cordon, interfaces) and what they reserve.
		Watches(&corev1.Node{}, ev.nodes()).
		// BGPPeers: which nodes can advertise a BGP group's VIPs, and the
		// addresses they reserve.
		Watches(&paasv1.BGPPeer{}, ev.peers()).
		Watches(&paasv1.IP{}, ev.ledger())
	if r.Reserved.ServiceCIDRs() {
		// Service CIDRs are reserved: status.reserved counts them (rare: every group).
		b = b.Watches(&networkingv1.ServiceCIDR{}, ev.serviceCIDRs())
	}
	return b.Complete(r)
}

// setLANHostAnswersManyCondition reports the MACs that answered the probe for
// more of g's addresses than the allocator believes of one host
// (allocator.FloodingMACs); absent when none did.
func setLANHostAnswersManyCondition(status *paasv1.IPGroupStatus, generation int64, g *allocator.Group, counts ledgerCounts) {
	var macs []string
	if g != nil {
		macs = allocator.FloodingMACs(counts.onLANBy, []*allocator.Group{g})[g.Name]
	}
	if len(macs) == 0 {
		meta.RemoveStatusCondition(&status.Conditions, paasv1.IPGroupLANHostAnswersMany)
		return
	}
	meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: paasv1.IPGroupLANHostAnswersMany, Status: metav1.ConditionTrue,
		ObservedGeneration: generation, Reason: paasv1.ReasonOneMACAnswersMany,
		Message: fmt.Sprintf("MAC %s answered the probe for more than %d of the group's addresses (proxy ARP, or a hostile host): no Service moves for its answers any more, each keeps its address, marked (IP condition %s); stop the host answering, or turn proxy ARP off on the router",
			strings.Join(macs, ", "), allocator.MaxInUseOnLANPerMAC, paasv1.IPConditionInUseOnLAN)})
}
