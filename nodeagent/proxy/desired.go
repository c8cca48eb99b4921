package proxy

import (
	"net/netip"

	"k8s.io/apimachinery/pkg/types"

	"github.com/paas-org/vip-allocator-operator/nodeagent/changes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// The agent's desired state is kept from events, so that one changed endpoint costs the work
// of one Service, not of all of them. The model is kube-proxy's change trackers (an event
// names what changed; a sync folds in only that): package changes says what is stale (events
// write it, the sync takes it); desiredState holds each Service's last derivation (only the
// sync touches it). It is pure: syncer.go reads the cache and the trust view.

// derived is one Service's last derivation.
type derived struct {
	// ds is what the data plane gets; served: it has a VIP this node carries.
	ds     dataplane.Service
	served bool
	report serviceReport
	// awaiting are the VIPs of ds whose ledger object awaits the data path:
	// this node reports them programmed once the planes carry them.
	awaiting []netip.Addr
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
	// every sync, to settle and keep their condition) and those with onLocal;
	// handingOver are the served ones with VIPs awaiting the data path.
	refused, local, handingOver map[types.NamespacedName]bool
	// families counts the served Services with a VIP of each family: a plane with none
	// is left untouched (syncer.go).
	families map[dataplane.Family]int
}

func newDesiredState() *desiredState {
	return &desiredState{byKey: map[types.NamespacedName]*derived{}, at: map[types.NamespacedName]int{},
		byAddr: map[netip.Addr]map[types.NamespacedName]bool{}, refused: map[types.NamespacedName]bool{}, local: map[types.NamespacedName]bool{},
		handingOver: map[types.NamespacedName]bool{},
		families:    map[dataplane.Family]int{}}
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
	delete(s.handingOver, key)
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
	if len(d.awaiting) > 0 {
		s.handingOver[key] = true
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

// staleKeys are the Services to derive again for st (All false): those named, those naming
// an address whose ledger object changed, and those with a VIP on this node (see onLocal).
func (s *desiredState) staleKeys(st changes.Set) []types.NamespacedName {
	seen := map[types.NamespacedName]bool{}
	var out []types.NamespacedName
	add := func(k types.NamespacedName) {
		if !seen[k] {
			seen[k] = true
			out = append(out, k)
		}
	}
	for k := range st.Services {
		add(k)
	}
	for a := range st.Addrs {
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

// awaitingCarried are the VIPs the served Services carry that await the data
// path, each once.
func (s *desiredState) awaitingCarried() []netip.Addr {
	seen := map[netip.Addr]bool{}
	var out []netip.Addr
	for key := range s.handingOver {
		for _, vip := range s.byKey[key].awaiting {
			if !seen[vip] {
				seen[vip] = true
				out = append(out, vip)
			}
		}
	}
	return out
}
