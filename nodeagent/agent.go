// Package nodeagent is the per-node agent: it turns the Services the operator
// gave VIPs (ipMode Proxy) and their ready endpoints into dataplane.Service
// values and hands them to one dataplane.Plane per family (the nftables plane,
// or the iptables one, as dataplane.Open picked), so traffic to VIP:port reaches
// an endpoint on every node whatever kube-proxy mode or CNI the cluster runs.
// It never writes to the API server's objects other than Events. It keeps its
// rules when it stops for a restart or an upgrade (traffic must not stop) and
// removes them, as `vip-allocator agent cleanup` does, only when it is being
// uninstalled (teardown.go).
package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// Options configure the agent.
type Options struct {
	NodeName string
	// OwnClassOnly mirrors the operator's --own-class-only.
	OwnClassOnly bool
	// ResyncPeriod is how often every rule is rewritten (drift repair).
	ResyncPeriod time.Duration
	// CheckPeriod is how often the canary and jump rules are checked.
	CheckPeriod time.Duration
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

	lastFull, lastCheck time.Time
	// active planes have written rules; a family with no VIP yet is left
	// untouched, so a node without IPv6 VIPs keeps its ip6tables as they are.
	active map[dataplane.Family]bool
}

// +kubebuilder:rbac:groups="",resources=services;nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

func (a *Agent) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	desired, err := a.desired(ctx)
	if err != nil {
		return reconcile.Result{}, err
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
	// Come back to check the canary, and for the periodic full sync.
	return reconcile.Result{RequeueAfter: a.Options.CheckPeriod}, nil
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

// desired lists the served Services with their endpoints, from the cache.
func (a *Agent) desired(ctx context.Context) ([]dataplane.Service, error) {
	var services corev1.ServiceList
	if err := a.Client.List(ctx, &services); err != nil {
		return nil, fmt.Errorf("list Services: %w", err)
	}
	var out []dataplane.Service
	for i := range services.Items {
		svc := &services.Items[i]
		if !Served(svc, a.Options.OwnClassOnly) {
			continue
		}
		var slices discoveryv1.EndpointSliceList
		if err := a.Client.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingFields{serviceNameIndex: svc.Name}); err != nil {
			return nil, fmt.Errorf("list EndpointSlices of %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		out = append(out, dataplaneService(svc, slices.Items, a.Options.NodeName))
	}
	return out, nil
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
