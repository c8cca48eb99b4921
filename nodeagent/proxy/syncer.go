package proxy

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
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
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/nodeagent/changes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/trust"
)

// Options configure the Syncer.
type Options struct {
	NodeName string
	// OwnClassOnly mirrors the operator's --own-class-only.
	OwnClassOnly bool
	// ResyncPeriod is how often every rule is rewritten (drift repair).
	ResyncPeriod time.Duration
	// CheckPeriod is how often the canary and jump rules are checked, and
	// this node's own addresses read again (nil LocalAddresses: from its
	// interfaces).
	CheckPeriod    time.Duration
	LocalAddresses func() (map[netip.Addr]string, error)
}

// syncRequest is the only work item: every event marks what it made stale
// (package changes) and asks for a sync, and the work queue folds bursts of events
// into one; a sync derives again only what is stale.
var syncRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "sync"}}

// Syncer keeps one data plane per address family in sync with the cluster:
// the Services' desired state, kept from events, handed to each plane.
type Syncer struct {
	Client  client.Reader
	Options Options
	Planes  []dataplane.Plane
	// Reporter writes on the Services what this agent refuses to carry (nil:
	// nothing is reported).
	Reporter *Reporter

	lastFull, lastCheck time.Time
	// changes is what events made stale since the last sync; state is every
	// Service's last derivation (nil until the first sync derives them all);
	// local is this node's addresses as that derivation saw them.
	changes changes.Tracker
	state   *desiredState
	local   map[netip.Addr]string
	// active planes have written rules; a family with no VIP yet is left
	// untouched, so a node without IPv6 VIPs keeps its ip6tables as they are.
	active map[dataplane.Family]bool
	// Unviewed reads the Nodes of the agents that publish no NodeView (nil:
	// none; see nodes.List).
	Unviewed *nodes.Unviewed
	// programmed is what the planes last synced of each Service: the stale
	// flows of a sync are told from it (forgetStaleFlows).
	programmed map[types.NamespacedName]dataplane.Service
	// nodeIPs are the Nodes' InternalIPs as the last derivation of every
	// Service read them: the steering peers (steer.go).
	nodeIPs map[string][]netip.Addr
}

// +kubebuilder:rbac:groups="",resources=services;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=services/status,verbs=patch

// Reconcile is one sync pass: the Services changed since the last one, or all of them once
// ResyncPeriod has passed.
func (s *Syncer) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	full := time.Since(s.lastFull) >= s.Options.ResyncPeriod
	stale := s.changes.Take()
	derivedNow, derivedAll, err := s.derive(ctx, stale, full)
	if err != nil {
		s.changes.PutBack(stale)
		return reconcile.Result{}, err
	}
	desired, reports := s.state.served, s.state.reports(derivedNow)
	requeue := s.Options.CheckPeriod
	if s.Reporter != nil {
		// Before the sync, which may fail: a refusal is reported whatever
		// happens to the rules of the other Services.
		if again := s.Reporter.Report(ctx, reports, time.Now()); again > 0 && again < requeue {
			requeue = again
		}
	}
	if s.active == nil {
		s.active = map[dataplane.Family]bool{}
	}
	var planes []dataplane.Plane
	for _, p := range s.Planes {
		if s.active[p.Family()] || s.state.families[p.Family()] > 0 {
			s.active[p.Family()] = true
			planes = append(planes, p)
		}
	}
	if derivedAll {
		// Before the Sync: a change of who serves makes it rewrite every element.
		// A peer that cannot be routed to is logged: the others are steered to.
		if err := s.setSteering(planes); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "steering routes")
		}
	}
	// Checking costs a listing (about 1 s with legacy iptables at 10,000
	// Services), so it runs on its own period, not on every event.
	if !full && time.Since(s.lastCheck) >= s.Options.CheckPeriod {
		s.lastCheck = time.Now()
		for _, p := range planes {
			if !p.Healthy() {
				ctrl.LoggerFrom(ctx).Info("rules changed behind our back: rewriting all", "family", p.Family())
				full = true
			}
		}
	}
	// A plane that can be told what changed compares only that (dataplane.ChangeSyncer).
	var changed map[string]bool
	if !derivedAll {
		changed = make(map[string]bool, len(derivedNow))
		for _, k := range derivedNow {
			changed[k.Namespace+"/"+k.Name] = true
		}
	}
	for _, p := range planes {
		var stats dataplane.SyncStats
		var err error
		if cs, ok := p.(dataplane.ChangeSyncer); ok && !full && changed != nil {
			stats, err = cs.SyncChanged(desired, changed)
		} else {
			stats, err = p.Sync(desired, full)
		}
		if err != nil {
			syncFailures.WithLabelValues(string(p.Family())).Inc()
			s.lastFull = time.Time{} // the next sync rewrites everything
			return reconcile.Result{}, fmt.Errorf("sync %s rules: %w", p.Family(), err)
		}
		mode := "partial"
		if stats.Full { // a sync after a failure is full whatever was asked
			mode = "full"
		}
		syncDuration.WithLabelValues(string(p.Family()), mode).Observe(stats.Duration.Seconds())
		rulesWritten.WithLabelValues(string(p.Family())).Set(float64(stats.Rules))
		elementsWritten.WithLabelValues(string(p.Family())).Set(float64(stats.Elements))
	}
	if full {
		s.lastFull = time.Now()
	}
	s.forgetStaleFlows(ctx, derivedNow, derivedAll)
	if err := s.reportProgrammed(ctx); err != nil { // only now: the planes carry them
		return reconcile.Result{}, err
	}
	// Come back to check the canary, for the periodic full sync, and to read
	// this node's addresses again (no event tells when they change).
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// forgetStaleFlows deletes the conntrack entries that would keep a UDP or
// SCTP client on an endpoint the rules no longer send to (dataplane.StaleFlows),
// comparing what the planes now hold with what they held for the Services
// derived in this sync (all of them: every Service ever programmed too). A
// failure is logged: the rules are right, and the next change tries again.
func (s *Syncer) forgetStaleFlows(ctx context.Context, derived []types.NamespacedName, all bool) {
	if s.programmed == nil {
		s.programmed = map[types.NamespacedName]dataplane.Service{}
	}
	keys := derived
	if all {
		keys = slices.AppendSeq(slices.Collect(maps.Keys(s.programmed)), maps.Keys(s.state.at))
	}
	var stale []dataplane.StaleFlow
	for _, key := range keys {
		var before, after *dataplane.Service
		if prev, ok := s.programmed[key]; ok {
			before = &prev
		}
		if i, ok := s.state.at[key]; ok {
			after = &s.state.served[i]
			s.programmed[key] = *after
		} else {
			delete(s.programmed, key)
		}
		stale = append(stale, dataplane.StaleFlows(before, after)...)
	}
	if len(stale) == 0 {
		return
	}
	if err := dataplane.ForgetFlows(stale); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "delete the conntrack entries of endpoints gone", "flows", len(stale))
	}
}

// Handoff gives every data plane its family's connection handoffs (see
// dataplane.Handoffs).
func (s *Syncer) Handoff(h dataplane.Handoffs) error {
	var errs []error
	for _, p := range s.Planes {
		errs = append(errs, p.SetHandoffs(h))
	}
	return errors.Join(errs...)
}

// derive brings the desired state up to date: every Service at the first
// sync, at the periodic full one (full), when a Node's addresses or this
// node's changed (trust is read from them for every Service); otherwise only
// the stale ones, so one changed endpoint costs one Service's derivation. It
// returns the Services it derived, and whether that was all of them.
func (s *Syncer) derive(ctx context.Context, stale changes.Set, full bool) (keys []types.NamespacedName, all bool, err error) {
	local, err := nodes.OwnAddresses(s.Options.LocalAddresses)
	if err != nil {
		return nil, false, fmt.Errorf("read this node's addresses: %w", err)
	}
	var services []corev1.Service
	var gone []types.NamespacedName
	all = s.state == nil || stale.All || full || !maps.Equal(local, s.local)
	if all {
		var list corev1.ServiceList
		if err := s.Client.List(ctx, &list); err != nil {
			return nil, false, fmt.Errorf("list Services: %w", err)
		}
		services = list.Items
	} else {
		for _, key := range s.state.staleKeys(stale) {
			var svc corev1.Service
			if err := s.Client.Get(ctx, key, &svc); apierrors.IsNotFound(err) {
				gone = append(gone, key)
				continue
			} else if err != nil {
				return nil, false, fmt.Errorf("get Service %s: %w", key, err)
			}
			services = append(services, svc)
		}
	}
	view, err := trust.Read(ctx, s.Client, s.Unviewed, s.Options.NodeName, services, s.Options.OwnClassOnly, local)
	if err != nil {
		return nil, false, err
	}
	results := make([]*derived, len(services))
	for i := range services {
		if results[i], err = s.deriveOne(ctx, &services[i], view); err != nil {
			return nil, false, err
		}
	}
	// Nothing failed: the state changes only now.
	if all {
		s.state = newDesiredState()
		s.nodeIPs = view.NodeIPs
	}
	s.local = local
	keys = make([]types.NamespacedName, 0, len(services)+len(gone))
	for i := range services {
		key := types.NamespacedName{Namespace: services[i].Namespace, Name: services[i].Name}
		s.state.set(key, results[i])
		keys = append(keys, key)
	}
	for _, key := range gone {
		s.state.set(key, nil)
		keys = append(keys, key)
	}
	return keys, all, nil
}

// deriveOne is what the data plane gets of svc (its served VIPs, ports and
// ready endpoints, from the cache), with only the addresses this node may
// carry (package trust), and what it refused (report.go).
func (s *Syncer) deriveOne(ctx context.Context, svc *corev1.Service, view trust.View) (*derived, error) {
	d := &derived{report: serviceReport{svc: svc}}
	d.addrs = ingress.Addrs(svc)
	for _, addr := range d.addrs {
		_, isLocal := view.Local[addr]
		d.onLocal = d.onLocal || isLocal
	}
	vips := Carried(svc, s.Options.OwnClassOnly, view.AwaitingDataPath)
	if len(vips) == 0 {
		return d, nil
	}
	var slices discoveryv1.EndpointSliceList
	if err := s.Client.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingFields{changes.ServiceNameIndex: svc.Name}); err != nil {
		return nil, fmt.Errorf("list EndpointSlices of %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	d.ds, d.report = programmable(dataplaneService(svc, vips, slices.Items, s.Options.NodeName), svc, view)
	steer, err := s.steered(ctx, d.ds.VIPs, view)
	if err != nil {
		return nil, err
	}
	d.ds.Steer = steer
	d.served = len(d.ds.VIPs) > 0
	for _, vip := range d.ds.VIPs {
		if view.AwaitingDataPath[vip] {
			d.awaiting = append(d.awaiting, vip)
		}
	}
	return d, nil
}

// SetupWithManager funnels every event into the single sync request; the
// cache must index EndpointSlices by Service (changes.IndexEndpointSlices).
func (s *Syncer) SetupWithManager(mgr ctrl.Manager) error {
	service := marking(s.changes.Observe)
	return ctrl.NewControllerManagedBy(mgr).
		Named("dataplane").
		Watches(&corev1.Service{}, service).
		Watches(&discoveryv1.EndpointSlice{}, service).
		// The ledger and the Nodes' addresses decide what may be carried
		// (package trust): a ledger object's spec (its generation; its status is the
		// announcers'), and a Node's addresses, which every Service's trust reads.
		Watches(&paasv1.IP{}, marking(func(o client.Object) {
			// The Services naming its address, and its owner.
			s.changes.Observe(o)
			if ip, ok := o.(*paasv1.IP); ok && ip.Spec.Owner != nil {
				s.changes.MarkService(types.NamespacedName{Namespace: ip.Spec.Owner.Namespace, Name: ip.Spec.Owner.Name})
			}
		}), builder.WithPredicates(ledgerChanged)).
		Watches(&corev1.Node{}, marking(func(client.Object) { s.changes.MarkAll() }), builder.WithPredicates(nodeAddressesChanged)).
		// A group's data path (steering or not) is every one of its Services'.
		Watches(&paasv1.IPGroup{}, marking(func(client.Object) { s.changes.MarkAll() }), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&paasv1.NodeView{}, marking(func(client.Object) { s.changes.MarkAll() }), builder.WithPredicates(viewAddressesChanged)).
		Complete(s)
}

// marking is the event handler that calls mark with each object an event
// carries (the old and the new one of an update) and asks for a sync.
func marking(mark func(client.Object)) handler.EventHandler {
	return handler.Funcs{
		CreateFunc: func(_ context.Context, e event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			mark(e.Object)
			q.Add(syncRequest)
		},
		UpdateFunc: func(_ context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			mark(e.ObjectOld)
			mark(e.ObjectNew)
			q.Add(syncRequest)
		},
		DeleteFunc: func(_ context.Context, e event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			mark(e.Object)
			q.Add(syncRequest)
		},
		GenericFunc: func(_ context.Context, e event.GenericEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			mark(e.Object)
			q.Add(syncRequest)
		},
	}
}

// ledgerChanged passes the ledger events that change what may be carried (its
// spec: the generation) and, while an address awaits the data path, those that
// change who announces it: a node that becomes its announcer reports it
// programmed (programmed.go).
var ledgerChanged = predicate.Or[client.Object](predicate.GenerationChangedPredicate{}, predicate.Funcs{
	CreateFunc:  func(event.CreateEvent) bool { return false },
	DeleteFunc:  func(event.DeleteEvent) bool { return false },
	GenericFunc: func(event.GenericEvent) bool { return false },
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*paasv1.IP)
		cur, okCur := e.ObjectNew.(*paasv1.IP)
		return okOld && okCur && cur.Spec.AwaitingDataPath && !slices.Equal(old.Status.AnnouncedBy, cur.Status.AnnouncedBy)
	},
})

// viewAddressesChanged passes the NodeView events that change a node's
// addresses, as nodeAddressesChanged does for this node's own Node.
var viewAddressesChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*paasv1.NodeView)
		cur, okCur := e.ObjectNew.(*paasv1.NodeView)
		return !okOld || !okCur || !slices.Equal(old.Spec.Addresses, cur.Spec.Addresses)
	},
}

// nodeAddressesChanged passes the Node events that can change which addresses
// are Nodes' (kubelets update their Node often for other reasons).
var nodeAddressesChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Node)
		cur, okCur := e.ObjectNew.(*corev1.Node)
		return !okOld || !okCur || !equality.Semantic.DeepEqual(old.Status.Addresses, cur.Status.Addresses)
	},
}
