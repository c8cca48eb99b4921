// Package nodeagent is the per-node agent: it turns the Services the operator
// gave VIPs (ipMode Proxy) and their ready endpoints into dataplane.Service
// values and hands them to one dataplane.Plane per family (the nftables plane,
// or the iptables one, as dataplane.Open picked), so traffic to VIP:port reaches
// an endpoint on every node whatever kube-proxy mode or CNI the cluster runs.
// It carries only the addresses the ledger gives a Service and that are no
// Node's nor its own (trust.go), and writes to the API server only Events and
// its one Service condition, vip.paas.org/Programmed (report.go). It keeps its
// rules when it stops for a restart or an upgrade (traffic must not stop) and
// removes them, as `vip-allocator agent cleanup` does, only when it is being
// uninstalled (teardown.go).
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// Options configure the agent.
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

const serviceNameIndex = "kubernetes.io/service-name"

// syncRequest is the only work item: every change leads to one sync of the
// whole node, and the work queue folds bursts of events into one.
var syncRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "sync"}}

// Agent keeps one data plane per address family in sync with the cluster.
type Agent struct {
	Client  client.Reader
	Options Options
	Planes  []dataplane.Plane
	// Reporter writes on the Services what this agent refuses to carry (nil:
	// nothing is reported).
	Reporter *Reporter

	lastFull, lastCheck time.Time
	// active planes have written rules; a family with no VIP yet is left
	// untouched, so a node without IPv6 VIPs keeps its ip6tables as they are.
	active map[dataplane.Family]bool
}

// +kubebuilder:rbac:groups="",resources=services;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch
// +kubebuilder:rbac:groups="",resources=services/status,verbs=patch

func (a *Agent) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	desired, reports, err := a.desired(ctx)
	if err != nil {
		return reconcile.Result{}, err
	}
	requeue := a.Options.CheckPeriod
	if a.Reporter != nil {
		// Before the sync, which may fail: a refusal is reported whatever
		// happens to the rules of the other Services.
		if again := a.Reporter.Report(ctx, reports, time.Now()); again > 0 && again < requeue {
			requeue = again
		}
	}
	if a.active == nil {
		a.active = map[dataplane.Family]bool{}
	}
	var planes []dataplane.Plane
	for _, p := range a.Planes {
		if a.active[p.Family()] || hasFamily(desired, p.Family()) {
			a.active[p.Family()] = true
			planes = append(planes, p)
		}
	}
	full := time.Since(a.lastFull) >= a.Options.ResyncPeriod
	// Checking costs a listing (about 1 s with legacy iptables at 10,000
	// Services), so it runs on its own period, not on every event.
	if !full && time.Since(a.lastCheck) >= a.Options.CheckPeriod {
		a.lastCheck = time.Now()
		for _, p := range planes {
			if !p.Healthy() {
				ctrl.LoggerFrom(ctx).Info("rules changed behind our back: rewriting all", "family", p.Family())
				full = true
			}
		}
	}
	for _, p := range planes {
		stats, err := p.Sync(desired, full)
		if err != nil {
			syncFailures.WithLabelValues(string(p.Family())).Inc()
			a.lastFull = time.Time{} // the next sync rewrites everything
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
		a.lastFull = time.Now()
	}
	// Come back to check the canary, for the periodic full sync, and to read
	// this node's addresses again (no event tells when they change).
	return reconcile.Result{RequeueAfter: requeue}, nil
}

// Handoff gives every data plane its family's connection handoffs (see
// dataplane.Handoffs).
func (a *Agent) Handoff(h dataplane.Handoffs) error {
	var errs []error
	for _, p := range a.Planes {
		errs = append(errs, p.SetHandoffs(h))
	}
	return errors.Join(errs...)
}

// desired lists the served Services with their endpoints, from the cache,
// each with only the addresses this node may carry (trust.go), and what it
// refused, for every Service (report.go).
func (a *Agent) desired(ctx context.Context) ([]dataplane.Service, []serviceReport, error) {
	var services corev1.ServiceList
	if err := a.Client.List(ctx, &services); err != nil {
		return nil, nil, fmt.Errorf("list Services: %w", err)
	}
	view, err := readTrust(ctx, a.Client, services.Items, a.Options.OwnClassOnly, a.localAddresses)
	if err != nil {
		return nil, nil, err
	}
	var out []dataplane.Service
	reports := make([]serviceReport, 0, len(services.Items))
	for i := range services.Items {
		svc := &services.Items[i]
		if !Served(svc, a.Options.OwnClassOnly) {
			reports = append(reports, serviceReport{svc: svc})
			continue
		}
		var slices discoveryv1.EndpointSliceList
		if err := a.Client.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingFields{serviceNameIndex: svc.Name}); err != nil {
			return nil, nil, fmt.Errorf("list EndpointSlices of %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		ds, report := programmable(dataplaneService(svc, slices.Items, a.Options.NodeName), svc, view)
		reports = append(reports, report)
		if len(ds.VIPs) > 0 {
			out = append(out, ds)
		}
	}
	return out, reports, nil
}

// localAddresses are this node's own addresses (Options.LocalAddresses, or
// every interface's).
func (a *Agent) localAddresses() (map[netip.Addr]string, error) {
	if a.Options.LocalAddresses != nil {
		return a.Options.LocalAddresses()
	}
	return LocalAddresses()
}

// SetupWithManager indexes EndpointSlices by Service and funnels every event
// into the single sync request.
func (a *Agent) SetupWithManager(mgr ctrl.Manager) error {
	if err := mgr.GetFieldIndexer().IndexField(context.Background(), &discoveryv1.EndpointSlice{}, serviceNameIndex, func(o client.Object) []string {
		if name, ok := o.GetLabels()[discoveryv1.LabelServiceName]; ok {
			return []string{name}
		}
		return nil
	}); err != nil {
		return err
	}
	toSync := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{syncRequest}
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("dataplane").
		Watches(&corev1.Service{}, toSync).
		Watches(&discoveryv1.EndpointSlice{}, toSync).
		// The ledger and the Nodes' addresses decide what may be carried
		// (trust.go): a ledger object's spec (its generation; its status is the
		// announcers'), and a Node's addresses.
		Watches(&paasv1.IP{}, toSync, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&corev1.Node{}, toSync, builder.WithPredicates(nodeAddressesChanged)).
		Complete(a)
}

// hasFamily reports whether any Service has a VIP of family fam.
func hasFamily(services []dataplane.Service, fam dataplane.Family) bool {
	for _, s := range services {
		for _, vip := range s.VIPs {
			if (fam == dataplane.IPv4) == vip.Unmap().Is4() {
				return true
			}
		}
	}
	return false
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
