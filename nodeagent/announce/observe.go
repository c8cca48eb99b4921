package announce

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/nodeagent/changes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/trust"
)

// store is what the announcer read, kept from pass to pass: a full pass
// reads it all, an incremental one refreshes only the Services and VIPs that
// changed (package changes).
type store struct {
	// groups are the IPGroups by name.
	groups map[string]*paasv1.IPGroup
	// nodeAddrs maps this Node's addresses to its name (see trust.View).
	nodeAddrs map[netip.Addr]string
	alive     []election.Node
	known     int
	self      *corev1.Node
	peers     []paasv1.BGPPeer
	// held maps each Service of ours to the VIPs in its status; holders is
	// the same the other way round.
	held    map[types.NamespacedName][]netip.Addr
	holders map[netip.Addr]map[types.NamespacedName]bool
	// vips and ledger are observation's: every VIP announced, and its entry.
	vips   map[netip.Addr]vipCandidacy
	ledger map[netip.Addr]*paasv1.IP
	// lanInUse are the ledger entries of addresses in use on the LAN
	// (probe.go).
	lanInUse map[netip.Addr]lanRecord
}

// fullPassEvery bounds how long what no event announces goes unseen (this
// node's own addresses, read with each VIP's trust): a pass this long after
// the last full one reads everything again.
const fullPassEvery = time.Minute

// fullPassPeriod is fullPassEvery, or less while Nodes are read without a
// view (package nodes): no event tells of their changes, so each full pass
// reads them again.
func (a *Announcer) fullPassPeriod() time.Duration {
	if r := a.Unviewed.RefreshEvery(); r > 0 && r < fullPassEvery {
		return r
	}
	return fullPassEvery
}

// observe reads what a pass decides from: everything, when ch says
// something every VIP depends on changed (or nothing was read yet), else
// only the Services and VIPs in ch; o.changed says which VIPs may have
// changed (nil: any). self is this agent's Node (nil when it is not in the
// cache).
func (a *Announcer) observe(ctx context.Context, ch changes.Set) (o observation, self *corev1.Node, err error) {
	o.now = time.Now()
	if a.seen == nil || ch.All || o.now.Sub(a.lastFull) >= a.fullPassPeriod() {
		a.seen = nil // a failure half-way leaves nothing half-read behind
		seen, err := a.observeAll(ctx)
		if err != nil {
			return o, nil, err
		}
		a.seen, a.lastFull = seen, o.now
	} else if o.changed, err = a.observeChanged(ctx, ch); err != nil {
		a.seen = nil
		return o, nil, err
	}
	s := a.seen
	o.vips, o.ledger, o.alive, o.known, o.peers = s.vips, s.ledger, s.alive, s.known, s.peers
	o.lanInUse, o.probed = s.lanInUse, a.probes.snapshot(o.now)
	return o, s.self, nil
}

// observeAll reads everything: each kind is listed once.
func (a *Announcer) observeAll(ctx context.Context) (*store, error) {
	var ledger paasv1.IPList
	if err := a.Client.List(ctx, &ledger); err != nil {
		return nil, fmt.Errorf("list IPs: %w", err)
	}
	byName := make(map[string]*paasv1.IP, len(ledger.Items))
	for i := range ledger.Items {
		byName[ledger.Items[i].Name] = &ledger.Items[i]
	}
	nodes, _, err := nodes.List(ctx, a.Client, a.Unviewed)
	if err != nil {
		return nil, err
	}
	s, err := a.readServices(ctx, byName, trust.NodeAddresses(nodes, a.NodeName))
	if err != nil {
		return nil, err
	}
	for i := range ledger.Items {
		if vip, ok := ledger.Items[i].Addr(); ok {
			s.noteInUse(vip, &ledger.Items[i])
		}
	}
	s.alive, s.known = aliveNodes(nodes, a.Liveness.AliveDraining(), a.OnCordon)
	if a.Index != nil {
		a.Index.Update(nodes)
	}
	for i := range nodes {
		if nodes[i].Name == a.NodeName {
			s.self = &nodes[i]
		}
	}
	if a.BGP != nil {
		var peers paasv1.BGPPeerList
		if err := a.Client.List(ctx, &peers); err != nil {
			return nil, fmt.Errorf("list BGPPeers: %w", err)
		}
		s.peers = peers.Items
	}
	return s, nil
}

// candidacies maps every VIP this agent's cluster announces (L2 or BGP) to
// what it asks of the nodes that carry it, and to its ledger entry. ledger is
// the ledger by object name: a VIP is announced only when its entry gives it
// to the Service.
func (a *Announcer) candidacies(ctx context.Context, ledger map[string]*paasv1.IP) (map[netip.Addr]vipCandidacy, map[netip.Addr]*paasv1.IP, error) {
	nodes, _, err := nodes.List(ctx, a.Client, a.Unviewed)
	if err != nil {
		return nil, nil, err
	}
	s, err := a.readServices(ctx, ledger, trust.NodeAddresses(nodes, a.NodeName))
	if err != nil {
		return nil, nil, err
	}
	return s.vips, s.ledger, nil
}

// readServices reads every Service and IPGroup and makes, with the ledger
// (by object name) and the Nodes' addresses, the Services' part of store.
func (a *Announcer) readServices(ctx context.Context, ledger map[string]*paasv1.IP, nodeAddrs map[netip.Addr]string) (*store, error) {
	var services corev1.ServiceList
	if err := a.Client.List(ctx, &services); err != nil {
		return nil, fmt.Errorf("list Services: %w", err)
	}
	var groups paasv1.IPGroupList
	if err := a.Client.List(ctx, &groups); err != nil {
		return nil, fmt.Errorf("list IPGroups: %w", err)
	}
	s := &store{groups: map[string]*paasv1.IPGroup{}, nodeAddrs: nodeAddrs,
		held: map[types.NamespacedName][]netip.Addr{}, holders: map[netip.Addr]map[types.NamespacedName]bool{},
		vips: map[netip.Addr]vipCandidacy{}, ledger: map[netip.Addr]*paasv1.IP{}}
	for i := range groups.Items {
		s.groups[groups.Items[i].Name] = &groups.Items[i]
	}
	// What the data plane refuses to carry is not announced either (package trust):
	// a Node's address, one of this node's own, one the ledger does not give
	// to the Service. The data plane reports it.
	local, err := nodes.OwnAddresses(a.LocalAddresses)
	if err != nil {
		return nil, fmt.Errorf("read this node's addresses: %w", err)
	}
	view, err := trust.ReadWith(ctx, a.Client, services.Items, a.OwnClassOnly, local, nodeAddrs)
	if err != nil {
		return nil, err
	}
	byKey := map[types.NamespacedName]*corev1.Service{}
	for i := range services.Items {
		svc := &services.Items[i]
		key := client.ObjectKeyFromObject(svc)
		byKey[key] = svc
		s.hold(key, vipsOf(svc, a.OwnClassOnly))
	}
	for vip := range s.holders {
		if err := a.elect(ctx, s, vip, s.holding(vip, byKey), view, ledger[paasv1.IPObjectName(vip)]); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// observeChanged refreshes a.seen for the Services and VIPs in ch (a few
// cache reads each) and returns the VIPs whose candidacy may have changed.
func (a *Announcer) observeChanged(ctx context.Context, ch changes.Set) (map[netip.Addr]bool, error) {
	s := a.seen
	dirty := map[netip.Addr]bool{}
	for vip := range ch.Addrs {
		dirty[vip] = true
	}
	read := map[types.NamespacedName]*corev1.Service{}
	for key := range ch.Services {
		var vips []netip.Addr
		svc := &corev1.Service{}
		switch err := a.Client.Get(ctx, key, svc); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get Service %s: %w", key, err)
		default:
			read[key] = svc
			vips = vipsOf(svc, a.OwnClassOnly)
		}
		for _, vip := range s.held[key] {
			dirty[vip] = true
		}
		for _, vip := range vips {
			dirty[vip] = true
		}
		s.hold(key, vips)
	}
	// The Services holding a changed VIP are read once, and so is the
	// trust view of their addresses.
	var holding []corev1.Service
	for vip := range dirty {
		for key := range s.holders[vip] {
			if _, ok := read[key]; ok {
				continue
			}
			svc := &corev1.Service{}
			if err := a.Client.Get(ctx, key, svc); err != nil {
				return nil, fmt.Errorf("get Service %s: %w", key, err)
			}
			read[key] = svc
		}
	}
	for _, svc := range read {
		holding = append(holding, *svc)
	}
	local, err := nodes.OwnAddresses(a.LocalAddresses)
	if err != nil {
		return nil, fmt.Errorf("read this node's addresses: %w", err)
	}
	view, err := trust.ReadWith(ctx, a.Client, holding, a.OwnClassOnly, local, s.nodeAddrs)
	if err != nil {
		return nil, err
	}
	for vip := range dirty {
		var entry *paasv1.IP
		ip := &paasv1.IP{}
		switch err := a.Client.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(vip)}, ip); {
		case apierrors.IsNotFound(err):
		case err != nil:
			return nil, fmt.Errorf("get ledger IP %s: %w", paasv1.IPObjectName(vip), err)
		default:
			entry = ip
		}
		if err := a.elect(ctx, s, vip, s.holding(vip, read), view, entry); err != nil {
			return nil, err
		}
		s.noteInUse(vip, entry)
	}
	return dirty, nil
}

// hold records that the Service key holds vips (none: it holds nothing).
func (s *store) hold(key types.NamespacedName, vips []netip.Addr) {
	for _, vip := range s.held[key] {
		delete(s.holders[vip], key)
		if len(s.holders[vip]) == 0 {
			delete(s.holders, vip)
		}
	}
	if len(vips) == 0 {
		delete(s.held, key)
		return
	}
	s.held[key] = vips
	for _, vip := range vips {
		if s.holders[vip] == nil {
			s.holders[vip] = map[types.NamespacedName]bool{}
		}
		s.holders[vip][key] = true
	}
}

// holding are the Services (from byKey) that hold vip, in the order of their keys.
func (s *store) holding(vip netip.Addr, byKey map[types.NamespacedName]*corev1.Service) []*corev1.Service {
	keys := make([]types.NamespacedName, 0, len(s.holders[vip]))
	for key := range s.holders[vip] {
		keys = append(keys, key)
	}
	slices.SortFunc(keys, func(a, b types.NamespacedName) int { return strings.Compare(a.String(), b.String()) })
	out := make([]*corev1.Service, 0, len(keys))
	for _, key := range keys {
		if svc := byKey[key]; svc != nil {
			out = append(out, svc)
		}
	}
	return out
}

// elect records in s what vip asks of the nodes that carry it: the candidacy
// of its group (per its ledger entry) joined over the Services holding it that
// this node may carry it for (package trust), or nothing (not announced).
func (a *Announcer) elect(ctx context.Context, s *store, vip netip.Addr, holding []*corev1.Service, view trust.View, entry *paasv1.IP) error {
	delete(s.vips, vip)
	delete(s.ledger, vip)
	group := groupOf(entry, s.groups)
	if group == nil {
		return nil // in no group we know: nothing says how to announce it
	}
	c, ok := election.CandidacyOfLedger(group, entry)
	if !ok {
		return nil
	}
	// A shared VIP: every Service on it asks (share.go).
	var joint vipCandidacy
	had := false
	for _, svc := range holding {
		if _, refused := view.RefusalOf(svc, vip); refused {
			continue
		}
		next := vipCandidacy{Candidacy: c, group: group}
		if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
			local, err := a.endpointNodes(ctx, svc)
			if err != nil {
				return err
			}
			next.LocalNodes = local
		}
		joint, had = jointCandidacy(joint, had, next), true
	}
	if had {
		s.vips[vip] = joint
		s.ledger[vip] = entry
	}
	return nil
}

// vipsOf are the VIPs in the status of svc (ingress.Addrs), when it is a
// Service of ours.
func vipsOf(svc *corev1.Service, ownClassOnly bool) []netip.Addr {
	if !lbclass.Handles(svc, ownClassOnly) {
		return nil
	}
	return ingress.Addrs(svc)
}

// groupOf is the IPGroup a VIP was allocated from, per its ledger entry ip
// (nil: none). Whether the ledger gives the VIP to the Service is
// trust.View.RefusalOf's to say.
func groupOf(ip *paasv1.IP, groups map[string]*paasv1.IPGroup) *paasv1.IPGroup {
	if ip == nil {
		return nil
	}
	return groups[ip.Labels[paasv1.IPGroupLabel]]
}

// endpointNodes are the nodes with a ready endpoint of svc.
func (a *Announcer) endpointNodes(ctx context.Context, svc *corev1.Service) (map[string]bool, error) {
	var slices discoveryv1.EndpointSliceList
	if err := a.Client.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingFields{changes.ServiceNameIndex: svc.Name}); err != nil {
		return nil, fmt.Errorf("list EndpointSlices of %s/%s: %w", svc.Namespace, svc.Name, err)
	}
	out := map[string]bool{}
	for _, s := range slices.Items {
		for _, e := range s.Endpoints {
			if (e.Conditions.Ready == nil || *e.Conditions.Ready) && e.NodeName != nil {
				out[*e.NodeName] = true
			}
		}
	}
	return out, nil
}

// aliveNodes are the Nodes whose agents are alive (members maps each alive
// agent to whether it is draining), as the election sees them, and how many
// Nodes run an agent at all.
func aliveNodes(nodes []corev1.Node, members map[string]bool, onCordon election.OnCordon) (alive []election.Node, known int) {
	for i := range nodes {
		n := &nodes[i]
		if !n.DeletionTimestamp.IsZero() {
			continue
		}
		if _, runsAgent := n.Annotations[paasv1.NodeInterfacesAnnotation]; runsAgent {
			known++
		}
		draining, ok := members[n.Name]
		if !ok {
			continue
		}
		en := onCordon.NodeOf(n)
		en.Draining = draining
		alive = append(alive, en)
	}
	return alive, known
}
