package nodeagent

import (
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// The announcer's change tracker, as kube-proxy's: the event handlers fold
// what changed into pending changes, and a pass looks again only at those
// Services and VIPs (announce_observe.go), so one Service created among
// thousands costs a few cache reads and one election, not a re-reading of
// every Service and ledger entry. What every VIP depends on (the Nodes, the
// IPGroups' specs, the BGPPeers, the agents' liveness) makes the next pass a full one.

// changeTracker collects, between passes, what the events said changed.
type changeTracker struct {
	mu      sync.Mutex
	pending changes
}

// changes are the Services and ledger entries that changed; all says that
// something every VIP depends on changed.
type changes struct {
	all      bool
	services map[types.NamespacedName]bool
	vips     map[netip.Addr]bool
}

// empty reports whether nothing changed.
func (c changes) empty() bool { return !c.all && len(c.services) == 0 && len(c.vips) == 0 }

// take returns what changed since the last take and starts afresh.
func (t *changeTracker) take() changes {
	t.mu.Lock()
	defer t.mu.Unlock()
	c := t.pending
	t.pending = changes{}
	return c
}

// putBack returns changes a failed pass took, to be looked at again.
func (t *changeTracker) putBack(c changes) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending.merge(c)
}

func (c *changes) merge(o changes) {
	c.all = c.all || o.all
	for k := range o.services {
		c.addService(k)
	}
	for v := range o.vips {
		c.addVIP(v)
	}
}

func (c *changes) addService(k types.NamespacedName) {
	if c.services == nil {
		c.services = map[types.NamespacedName]bool{}
	}
	c.services[k] = true
}

func (c *changes) addVIP(v netip.Addr) {
	if c.vips == nil {
		c.vips = map[netip.Addr]bool{}
	}
	c.vips[v] = true
}

// observe records what an event about obj changed: a Service by its key, an
// EndpointSlice by its Service's (the nodes with endpoints of a Local
// Service), a ledger entry by its address; anything else changes every VIP.
func (t *changeTracker) observe(obj client.Object) {
	t.mu.Lock()
	defer t.mu.Unlock()
	switch o := obj.(type) {
	case *corev1.Service:
		t.pending.addService(client.ObjectKeyFromObject(o))
	case *discoveryv1.EndpointSlice:
		if name, ok := o.Labels[discoveryv1.LabelServiceName]; ok {
			t.pending.addService(types.NamespacedName{Namespace: o.Namespace, Name: name})
		}
	case *paasv1.IP:
		if vip, err := netip.ParseAddr(o.Spec.Address); err == nil {
			t.pending.addVIP(vip.Unmap())
		} else {
			t.pending.all = true // an entry we cannot place: look at all
		}
	default:
		t.pending.all = true
	}
}

// everything marks every VIP changed (the agents' liveness changed).
func (t *changeTracker) everything() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.pending.all = true
}

// nodeAnnounceChanged passes the Node events that can change an election or
// what may be announced: labels, annotations (the interfaces), spec (cordon),
// addresses, deletion. The kubelet's status updates (conditions, heartbeats
// every few minutes, images) change none of them and would otherwise make
// every agent re-elect every VIP each time any Node reports.
var nodeAnnounceChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Node)
		cur, okCur := e.ObjectNew.(*corev1.Node)
		if !okOld || !okCur {
			return true
		}
		return !equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
			!equality.Semantic.DeepEqual(old.Annotations, cur.Annotations) ||
			!equality.Semantic.DeepEqual(old.Spec, cur.Spec) ||
			!equality.Semantic.DeepEqual(old.Status.Addresses, cur.Status.Addresses) ||
			!old.DeletionTimestamp.Equal(cur.DeletionTimestamp)
	},
}
