package service

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// The end of an adopted address's hand-over follows the layer-2 election, as the operator
// computes it from the same pure function the agents run (internal/election), not the ledger's
// announcedBy and programmedBy: any agent may write its own node into both and drop the node
// it replaces, and must not thereby make kube-proxy let go of the address or make the
// operator forget the node it was adopted from. The operator does not see the agents'
// gossip: it takes the agent of every Ready Node as alive. Where that differs from the agents'
// view (an agent dead on a Ready Node), the hand-over waits, and kube-proxy keeps forwarding
// the address meanwhile.

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=discovery.k8s.io,resources=endpointslices,verbs=list

// handOverOwner is the node the layer-2 election gives vip asking c, among nodes taken as
// alive: those whose agent published its interfaces, Ready and not being deleted. "" when no
// node may carry it.
func handOverOwner(vip netip.Addr, c election.Candidacy, nodes []corev1.Node, onCordon election.OnCordon) string {
	var alive []election.Node
	for i := range nodes {
		n := &nodes[i]
		if !n.DeletionTimestamp.IsZero() || !nodeReady(n) {
			continue
		}
		if en := onCordon.NodeOf(n); en.Agent {
			alive = append(alive, en)
		}
	}
	owner, _, _ := election.Owner(vip, c, alive)
	return owner
}

// nodeReady reports whether n's kubelet says it is Ready.
func nodeReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// localNodes are the nodes with a ready endpoint among a Service's EndpointSlices eps: the only nodes that may
// carry its address under externalTrafficPolicy Local.
func localNodes(eps []discoveryv1.EndpointSlice) map[string]bool {
	out := map[string]bool{}
	for _, s := range eps {
		for _, e := range s.Endpoints {
			if (e.Conditions.Ready == nil || *e.Conditions.Ready) && e.NodeName != nil {
				out[*e.NodeName] = true
			}
		}
	}
	return out
}

// electedOwner is handOverOwner for ip's address held by svc in group g, read from the cache
// (Nodes) and the API server (svc's EndpointSlices, only for a Local Service). It is asked
// only while the address is in hand-over (awaiting the data path, or adopted from a node).
func (r *Reconciler) electedOwner(ctx context.Context, svc *corev1.Service, g *paasv1.IPGroup, ip *paasv1.IP) (string, error) {
	addr, ok := ip.Addr()
	if !ok || (!ip.Spec.AwaitingDataPath && ip.Spec.AdoptedFromNode == "") || election.ModeOf(g) != paasv1.AnnounceL2 {
		return "", nil
	}
	c, ok := election.CandidacyOfLedger(g, ip)
	if !ok {
		return "", nil
	}
	if svc != nil && svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		var eps discoveryv1.EndpointSliceList
		if err := r.APIReader.List(ctx, &eps, client.InNamespace(svc.Namespace), client.MatchingLabels{discoveryv1.LabelServiceName: svc.Name}); err != nil {
			return "", fmt.Errorf("list the EndpointSlices of Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
		c.LocalNodes = localNodes(eps.Items)
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return "", fmt.Errorf("list Nodes for the election of %s: %w", addr, err)
	}
	return handOverOwner(addr, c, nodes.Items, r.OnCordon), nil
}

// nodeElectionChanged passes the Node events that may change the election the operator
// computes for a hand-over: a Node comes or goes, turns Ready or not, or changes what
// election.NodeOf reads (labels, cordon, the interfaces its agent published).
var nodeElectionChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Node)
		cur, okCur := e.ObjectNew.(*corev1.Node)
		if !okOld || !okCur {
			return true
		}
		return nodeReady(old) != nodeReady(cur) || old.Spec.Unschedulable != cur.Spec.Unschedulable ||
			!maps.Equal(old.Labels, cur.Labels) || !maps.Equal(old.Annotations, cur.Annotations) ||
			!slices.Equal(old.Status.Addresses, cur.Status.Addresses) || old.DeletionTimestamp.IsZero() != cur.DeletionTimestamp.IsZero()
	},
}

// servicesInHandOver maps a Node event to the Services holding an address whose hand-over is
// not over (handOverOwner decides its end).
func (r *Reconciler) servicesInHandOver(c client.Reader) handler.MapFunc {
	return func(ctx context.Context, _ client.Object) []reconcile.Request {
		var ips paasv1.IPList
		if err := c.List(ctx, &ips); err != nil {
			log.FromContext(ctx).Error(err, "list the ledger for the addresses in hand-over")
			return nil
		}
		var out []reconcile.Request
		for i := range ips.Items {
			ip := &ips.Items[i]
			if !ip.Spec.AwaitingDataPath && ip.Spec.AdoptedFromNode == "" {
				continue
			}
			for _, holder := range ledger.ServiceNames(ip) {
				out = append(out, reconcile.Request{NamespacedName: holder})
			}
		}
		return out
	}
}
