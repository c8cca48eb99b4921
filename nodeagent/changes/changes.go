// Package changes is the agent's one change tracker, as kube-proxy's
// endpointschangetracker is every proxier's: the event handlers of the data
// path (nodeagent/proxy) and of the announcer (nodeagent/announce) fold what
// an event concerns into pending changes, and a pass takes them and looks
// again only at those Services and ledger addresses, so one changed endpoint
// among thousands costs one Service's work, not all of them.
//
// It records only what is stale, never old or new values: a pass reads each
// stale object again from the cache, which is newer than any event, so a
// burst of events on one Service costs one read and nothing needs merging.
// What a change means (which rules, which election) is its consumers' to
// decide.
package changes

import (
	"context"
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Set is what changed between two passes: Services by key, ledger entries by
// their address, or (All) something every Service and VIP depends on.
type Set struct {
	All      bool
	Services map[types.NamespacedName]bool
	Addrs    map[netip.Addr]bool
}

// Empty reports whether nothing changed.
func (s Set) Empty() bool { return !s.All && len(s.Services) == 0 && len(s.Addrs) == 0 }

// Merge adds what o holds to s.
func (s *Set) Merge(o Set) {
	s.All = s.All || o.All
	for k := range o.Services {
		s.AddService(k)
	}
	for a := range o.Addrs {
		s.AddAddr(a)
	}
}

// AddService records the Service k; a key with no name is no Service.
func (s *Set) AddService(k types.NamespacedName) {
	if k.Name == "" {
		return
	}
	if s.Services == nil {
		s.Services = map[types.NamespacedName]bool{}
	}
	s.Services[k] = true
}

// AddAddr records the ledger entry of the address a.
func (s *Set) AddAddr(a netip.Addr) {
	if s.Addrs == nil {
		s.Addrs = map[netip.Addr]bool{}
	}
	s.Addrs[a.Unmap()] = true
}

// Tracker collects, between passes, what the events said changed. Event
// handlers call it from the informers' goroutines; one pass (one worker)
// takes it.
type Tracker struct {
	mu      sync.Mutex
	pending Set
}

// Observe records what an event about obj concerns: a Service by its key, an
// EndpointSlice by its Service's (ServiceOf), a ledger entry by its address
// (one that does not parse cannot be placed: everything); anything else, a
// Node, an IPGroup, a BGPPeer, changes everything.
func (t *Tracker) Observe(obj client.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if key, ok := ServiceOf(obj); ok {
		t.pending.AddService(key)
		return
	}
	switch o := obj.(type) {
	case *discoveryv1.EndpointSlice:
		// Of no Service: nothing depends on it.
	case *paasv1.IP:
		if addr, err := netip.ParseAddr(o.Spec.Address); err == nil {
			t.pending.AddAddr(addr)
		} else {
			t.pending.All = true
		}
	default:
		t.pending.All = true
	}
}

// MarkService records the Services keys.
func (t *Tracker) MarkService(keys ...types.NamespacedName) {
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, k := range keys {
		t.pending.AddService(k)
	}
}

// MarkAll records that everything changed.
func (t *Tracker) MarkAll() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending.All = true
}

// Take returns what changed since the last Take and starts afresh.
func (t *Tracker) Take() Set {
	t.mu.Lock()
	defer t.mu.Unlock()
	s := t.pending
	t.pending = Set{}
	return s
}

// PutBack returns what a pass took and could not finish with, to be looked at
// again.
func (t *Tracker) PutBack(s Set) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending.Merge(s)
}

// ServiceOf names the Service an object's event concerns: a Service itself,
// or the Service an EndpointSlice says it belongs to (its
// kubernetes.io/service-name label).
func ServiceOf(obj any) (types.NamespacedName, bool) {
	switch o := obj.(type) {
	case *corev1.Service:
		return types.NamespacedName{Namespace: o.Namespace, Name: o.Name}, true
	case *discoveryv1.EndpointSlice:
		if name := o.Labels[discoveryv1.LabelServiceName]; name != "" {
			return types.NamespacedName{Namespace: o.Namespace, Name: name}, true
		}
	}
	return types.NamespacedName{}, false
}

// ServiceNameIndex is the cache index of EndpointSlices by the Service they
// belong to, by the same label ServiceOf reads: how a pass lists one Service's
// EndpointSlices.
const ServiceNameIndex = "kubernetes.io/service-name"

// IndexEndpointSlices adds ServiceNameIndex to the cache behind indexer.
func IndexEndpointSlices(ctx context.Context, indexer client.FieldIndexer) error {
	return indexer.IndexField(ctx, &discoveryv1.EndpointSlice{}, ServiceNameIndex, func(o client.Object) []string {
		if name, ok := o.GetLabels()[discoveryv1.LabelServiceName]; ok {
			return []string{name}
		}
		return nil
	})
}
