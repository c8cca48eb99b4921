package nodeagent

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
)

// observe reads, from the cache, everything a pass decides from: each kind
// is listed once. self is this agent's Node (nil when it is not in the cache).
func (a *Announcer) observe(ctx context.Context) (o observation, self *corev1.Node, err error) {
	o.now = time.Now()
	var ledger paasv1.IPList
	if err := a.Client.List(ctx, &ledger); err != nil {
		return o, nil, fmt.Errorf("list IPs: %w", err)
	}
	byName := make(map[string]*paasv1.IP, len(ledger.Items))
	for i := range ledger.Items {
		byName[ledger.Items[i].Name] = &ledger.Items[i]
	}
	if o.vips, o.ledger, err = a.candidacies(ctx, byName); err != nil {
		return o, nil, err
	}
	var nodes corev1.NodeList
	if err := a.Client.List(ctx, &nodes); err != nil {
		return o, nil, fmt.Errorf("list Nodes: %w", err)
	}
	o.alive, o.known = aliveNodes(nodes.Items, a.Liveness.AliveDraining(), a.OnCordon)
	if a.nodes != nil {
		a.nodes.update(nodes.Items)
	}
	for i := range nodes.Items {
		if nodes.Items[i].Name == a.NodeName {
			self = &nodes.Items[i]
		}
	}
	if a.BGP != nil {
		var peers paasv1.BGPPeerList
		if err := a.Client.List(ctx, &peers); err != nil {
			return o, nil, fmt.Errorf("list BGPPeers: %w", err)
		}
		o.peers = peers.Items
	}
	return o, self, nil
}

// candidacies maps every VIP this agent's cluster announces (L2 or BGP) to
// what it asks of the nodes that carry it, and to its ledger entry. ledger is the ledger by object name: a VIP is announced only
// when its entry gives it to the Service.
func (a *Announcer) candidacies(ctx context.Context, ledger map[string]*paasv1.IP) (map[netip.Addr]vipCandidacy, map[netip.Addr]*paasv1.IP, error) {
	var services corev1.ServiceList
	if err := a.Client.List(ctx, &services); err != nil {
		return nil, nil, fmt.Errorf("list Services: %w", err)
	}
	var groups paasv1.IPGroupList
	if err := a.Client.List(ctx, &groups); err != nil {
		return nil, nil, fmt.Errorf("list IPGroups: %w", err)
	}
	byName := map[string]*paasv1.IPGroup{}
	for i := range groups.Items {
		byName[groups.Items[i].Name] = &groups.Items[i]
	}
	// What the data plane refuses to carry is not announced either (trust.go):
	// a Node's address, one of this node's own, one the ledger does not give
	// to the Service. The data plane reports it.
	trust, err := readTrust(ctx, a.Client, services.Items, a.OwnClassOnly, a.localAddresses)
	if err != nil {
		return nil, nil, err
	}
	out, entries := map[netip.Addr]vipCandidacy{}, map[netip.Addr]*paasv1.IP{}
	for i := range services.Items {
		svc := &services.Items[i]
		if !lbclass.Handles(svc, a.OwnClassOnly) {
			continue
		}
		var local map[string]bool
		for _, in := range svc.Status.LoadBalancer.Ingress {
			vip, err := netip.ParseAddr(in.IP)
			if err != nil || vip.Zone() != "" {
				continue
			}
			vip = vip.Unmap()
			if _, refused := trust.refusalOf(svc, vip); refused {
				continue
			}
			entry := ledger[paasv1.IPObjectName(vip)]
			group := groupOf(entry, byName)
			if group == nil {
				continue // in no group we know: nothing says how to announce it
			}
			c, ok := election.CandidacyOf(group)
			if !ok {
				continue
			}
			if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
				if local == nil {
					if local, err = a.endpointNodes(ctx, svc); err != nil {
						return nil, nil, err
					}
				}
				c.LocalNodes = local
			}
			prev, had := out[vip] // a shared VIP: every Service on it asks
			out[vip] = jointCandidacy(prev, had, vipCandidacy{Candidacy: c, group: group})
			entries[vip] = entry
		}
	}
	return out, entries, nil
}

// groupOf is the IPGroup a VIP was allocated from, per its ledger entry ip
// (nil: none). Whether the ledger gives the VIP to the Service is
// trustView.refusalOf's to say.
func groupOf(ip *paasv1.IP, groups map[string]*paasv1.IPGroup) *paasv1.IPGroup {
	if ip == nil {
		return nil
	}
	return groups[ip.Labels[paasv1.IPGroupLabel]]
}

// localAddresses are this node's own addresses (LocalAddresses field, or
// every interface's).
func (a *Announcer) localAddresses() (map[netip.Addr]string, error) {
	if a.LocalAddresses != nil {
		return a.LocalAddresses()
	}
	return LocalAddresses()
}

// endpointNodes are the nodes with a ready endpoint of svc.
func (a *Announcer) endpointNodes(ctx context.Context, svc *corev1.Service) (map[string]bool, error) {
	var slices discoveryv1.EndpointSliceList
	if err := a.Client.List(ctx, &slices, client.InNamespace(svc.Namespace), client.MatchingFields{serviceNameIndex: svc.Name}); err != nil {
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
