package nodeagent

import (
	"net/netip"
	"sync"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// The agent's desired state is kept from events, so that one changed endpoint costs the work
// of one Service, not of all of them. The model is kube-proxy's change trackers (an event
// names what changed; a sync folds in only that), with one difference: we record only which
// Services are stale, not their old and new values, and derive each stale one again from the
// cache at sync time. The cache is newer than any event, so a burst of events on one Service
// costs one derivation, and nothing needs merging.
//
// dataChanges says what is stale (events write it, the sync takes it); desiredState holds each
// Service's last derivation (only the sync touches it). Both are pure: agent.go reads the
// cache and the trust view.

// dataChanges collects, between two syncs, the Services whose derivation is stale. Event handlers
// call it from the informers' goroutines; the sync takes it.
type dataChanges struct {
	mu    sync.Mutex
	dirty map[types.NamespacedName]bool
	// addrs are addresses whose ledger object changed: the sync makes stale the Services
	// naming them (desiredState.naming; only the sync reads that index).
	addrs map[netip.Addr]bool
	// all: every Service is stale (the agent's start, a Node's addresses changed: trust is
	// derived from them for every Service).
	all bool
}

func (c *dataChanges) mark(keys ...types.NamespacedName) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.dirty == nil {
		c.dirty = map[types.NamespacedName]bool{}
	}
	for _, k := range keys {
		if k.Name != "" {
			c.dirty[k] = true
		}
	}
}

// markLedger records a ledger object's event: its owner and its address are stale.
func (c *dataChanges) markLedger(ip *paasv1.IP) {
	if ip.Spec.Owner != nil {
		c.mark(types.NamespacedName{Namespace: ip.Spec.Owner.Namespace, Name: ip.Spec.Owner.Name})
	}
	addr, err := netip.ParseAddr(ip.Spec.Address)
	if err != nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.addrs == nil {
		c.addrs = map[netip.Addr]bool{}
	}
	c.addrs[addr.Unmap()] = true
}

func (c *dataChanges) markAll() {
	c.mu.Lock()
	c.all = true
	c.mu.Unlock()
}

// stale is what changes held at one sync.
type stale struct {
	keys  []types.NamespacedName
	addrs []netip.Addr
	all   bool
}

// take returns what is stale and forgets it.
func (c *dataChanges) take() stale {
	c.mu.Lock()
	defer c.mu.Unlock()
	var st stale
	for k := range c.dirty {
		st.keys = append(st.keys, k)
	}
	for a := range c.addrs {
		st.addrs = append(st.addrs, a)
	}
	st.all = c.all
	c.dirty, c.addrs, c.all = nil, nil, false
	return st
}

// giveBack makes st stale again (a sync that failed before it used it).
func (c *dataChanges) giveBack(st stale) {
	c.mark(st.keys...)
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, a := range st.addrs {
		if c.addrs == nil {
			c.addrs = map[netip.Addr]bool{}
		}
		c.addrs[a] = true
	}
	c.all = c.all || st.all
}

// serviceOf names the Service an object's event concerns: a Service itself, or the Service
// an EndpointSlice says it belongs to (its kubernetes.io/service-name label).
func serviceOf(obj any) (types.NamespacedName, bool) {
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

// derived is one Service's last derivation.
type derived struct {
	// ds is what the data plane gets; served: it has a VIP this node carries.
	ds     dataplane.Service
	served bool
	report serviceReport
	// addrs are the addresses of its status (any mode): a ledger object's event concerns
	// the Services naming its address.
	addrs []netip.Addr
	// onLocal: one of addrs is on this node. What the agent may carry then also depends on
	// the legacy VirtualIPs being migrated, which no event tells: such a Service is derived
	// again at every sync (there is none outside a migration).
	onLocal bool
}

// desiredState is every Service's last derivation, with the served ones in a slice kept in
// place (what the data plane is handed, without building it again at each sync).
type desiredState struct {
	byKey map[types.NamespacedName]*derived
	// served holds the data-plane Services; at[key] is the index of key's.
	served []dataplane.Service
	at     map[types.NamespacedName]int
	// byAddr maps each address in a status to the Services naming it.
	byAddr map[netip.Addr]map[types.NamespacedName]bool
	// refused and local are the Services with a refusal (the reporter must see them at
	// every sync, to settle and keep their condition) and those with onLocal.
	refused, local map[types.NamespacedName]bool
	// families counts the served Services with a VIP of each family: a plane with none
	// is left untouched (agent.go).
	families map[dataplane.Family]int
}

func newDesiredState() *desiredState {
	return &desiredState{byKey: map[types.NamespacedName]*derived{}, at: map[types.NamespacedName]int{},
		byAddr: map[netip.Addr]map[types.NamespacedName]bool{}, refused: map[types.NamespacedName]bool{}, local: map[types.NamespacedName]bool{},
		families: map[dataplane.Family]int{}}
}

// set records key's new derivation; nil: the Service is gone.
func (s *desiredState) set(key types.NamespacedName, d *derived) {
	if old := s.byKey[key]; old != nil {
		for _, a := range old.addrs {
			delete(s.byAddr[a], key)
			if len(s.byAddr[a]) == 0 {
				delete(s.byAddr, a)
			}
		}
	}
	delete(s.refused, key)
	delete(s.local, key)
	if d == nil {
		delete(s.byKey, key)
		s.unserve(key)
		return
	}
	s.byKey[key] = d
	for _, a := range d.addrs {
		if s.byAddr[a] == nil {
			s.byAddr[a] = map[types.NamespacedName]bool{}
		}
		s.byAddr[a][key] = true
	}
	if len(d.report.refusals) > 0 {
		s.refused[key] = true
	}
	if d.onLocal {
		s.local[key] = true
	}
	if !d.served {
		s.unserve(key)
		return
	}
	s.count(d.ds, 1)
	if i, ok := s.at[key]; ok {
		s.count(s.served[i], -1)
		s.served[i] = d.ds
		return
	}
	s.at[key] = len(s.served)
	s.served = append(s.served, d.ds)
}

// count adds by to the families of ds's VIPs.
func (s *desiredState) count(ds dataplane.Service, by int) {
	var v4, v6 bool
	for _, vip := range ds.VIPs {
		v4, v6 = v4 || vip.Unmap().Is4(), v6 || !vip.Unmap().Is4()
	}
	if v4 {
		s.families[dataplane.IPv4] += by
	}
	if v6 {
		s.families[dataplane.IPv6] += by
	}
}

// unserve takes key's Service out of the served slice: the last one takes its place.
func (s *desiredState) unserve(key types.NamespacedName) {
	i, ok := s.at[key]
	if !ok {
		return
	}
	s.count(s.served[i], -1)
	last := len(s.served) - 1
	if i != last {
		moved := s.served[last]
		s.served[i] = moved
		s.at[types.NamespacedName{Namespace: moved.Namespace, Name: moved.Name}] = i
	}
	s.served[last] = dataplane.Service{}
	s.served = s.served[:last]
	delete(s.at, key)
}

// staleKeys are the Services to derive again for st (all false): those named, those naming
// an address whose ledger object changed, and those with a VIP on this node (see onLocal).
func (s *desiredState) staleKeys(st stale) []types.NamespacedName {
	seen := map[types.NamespacedName]bool{}
	var out []types.NamespacedName
	add := func(k types.NamespacedName) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for _, k := range st.keys {
		add(k)
	}
	for _, a := range st.addrs {
		for k := range s.byAddr[a] {
			add(k)
		}
	}
	for k := range s.local {
		add(k)
	}
	return out
}

// reports are what the reporter sees at a sync: the Services derived again in it (a refusal
// that is gone must clear their condition) and every Service with a refusal.
func (s *desiredState) reports(derivedNow []types.NamespacedName) []serviceReport {
	seen := map[types.NamespacedName]bool{}
	var out []serviceReport
	add := func(k types.NamespacedName) {
		if d := s.byKey[k]; d != nil && !seen[k] {
			seen[k] = true
			out = append(out, d.report)
		}
	}
	for _, k := range derivedNow {
		add(k)
	}
	for k := range s.refused {
		add(k)
	}
	return out
}
