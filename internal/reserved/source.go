package reserved

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=servicecidrs,verbs=get;list;watch

// Source reads the cluster's reserved addresses. The Service and
// IPGroup reconcilers share one.
type Source struct {
	// serviceCIDRs are configured (--service-cidrs) for clusters that serve no
	// networking.k8s.io/v1 ServiceCIDR objects, or to add ranges to them.
	serviceCIDRs []netip.Prefix
	// watchServiceCIDRs is set when the API server serves ServiceCIDR objects.
	watchServiceCIDRs bool
}

// NewSource asks the API server whether it serves ServiceCIDRs
// (Kubernetes 1.33+); configured are reserved besides them.
func NewSource(mgr ctrl.Manager, configured []netip.Prefix) (*Source, error) {
	s := &Source{serviceCIDRs: configured}
	_, err := mgr.GetRESTMapper().RESTMapping(networkingv1.SchemeGroupVersion.WithKind("ServiceCIDR").GroupKind(), "v1")
	switch {
	case err == nil:
		s.watchServiceCIDRs = true
	case meta.IsNoMatchError(err):
		mgr.GetLogger().Info("the API server serves no networking.k8s.io/v1 ServiceCIDR; only --service-cidrs are reserved", "serviceCIDRs", configured)
	default:
		// Guessing "not served" would silently hand out ClusterIPs.
		return nil, fmt.Errorf("discover ServiceCIDRs: %w", err)
	}
	return s, nil
}

// List reads the reservations from c (the cache).
func (s *Source) List(ctx context.Context, c client.Reader) ([]allocator.Reservation, error) {
	var nodes corev1.NodeList // read only: the cache's own, uncopied
	if err := c.List(ctx, &nodes, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list Nodes: %w", err)
	}
	var cidrs networkingv1.ServiceCIDRList
	if s.watchServiceCIDRs {
		if err := c.List(ctx, &cidrs, client.UnsafeDisableDeepCopy); err != nil {
			return nil, fmt.Errorf("list ServiceCIDRs: %w", err)
		}
	}
	var peers paasv1.BGPPeerList
	if err := c.List(ctx, &peers, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list BGPPeers: %w", err)
	}
	var groups paasv1.IPGroupList
	if err := c.List(ctx, &groups, client.UnsafeDisableDeepCopy); err != nil {
		return nil, fmt.Errorf("list IPGroups: %w", err)
	}
	return append(k8salloc.Reservations(nodes.Items, cidrs.Items, s.serviceCIDRs, L2Routers(groups.Items)), k8salloc.PeerReservations(peers.Items)...), nil
}

// L2Routers are the gateways of the groups announced on layer 2: they
// confirm a subnet a node's agent says the node is on, for its claims
// (k8salloc.NodeClaims), as they do for announcing (election.Candidacy.Routers).
func L2Routers(groups []paasv1.IPGroup) []netip.Addr {
	var out []netip.Addr
	for i := range groups {
		if election.ModeOf(&groups[i]) != paasv1.AnnounceL2 {
			continue
		}
		if c, ok := election.CandidacyOf(&groups[i]); ok {
			out = append(out, c.Routers...)
		}
	}
	return out
}

// Watch calls refresh on every Node, ServiceCIDR, BGPPeer or IPGroup change that may
// change the reserved addresses.
func (s *Source) Watch(b *ctrl.Builder, refresh func(context.Context, workqueue.TypedRateLimitingInterface[reconcile.Request])) *ctrl.Builder {
	h := handler.Funcs{
		CreateFunc: func(ctx context.Context, _ event.CreateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			refresh(ctx, q)
		},
		UpdateFunc: func(ctx context.Context, e event.UpdateEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			if Changed(e.ObjectOld, e.ObjectNew) {
				refresh(ctx, q)
			}
		},
		DeleteFunc: func(ctx context.Context, _ event.DeleteEvent, q workqueue.TypedRateLimitingInterface[reconcile.Request]) {
			refresh(ctx, q)
		},
	}
	b = b.Watches(&corev1.Node{}, h)
	b = b.Watches(&paasv1.BGPPeer{}, h)
	b = b.Watches(&paasv1.IPGroup{}, h)
	if s.watchServiceCIDRs {
		b = b.Watches(&networkingv1.ServiceCIDR{}, h)
	}
	return b
}

// Changed reports a change of what a Node or ServiceCIDR reserves;
// status heartbeats are not.
func Changed(old, cur client.Object) bool {
	if op, ok := old.(*paasv1.BGPPeer); ok {
		return op.Spec.PeerAddress != cur.(*paasv1.BGPPeer).Spec.PeerAddress
	}
	if og, ok := old.(*paasv1.IPGroup); ok {
		cg := cur.(*paasv1.IPGroup)
		return !slices.Equal(L2Routers([]paasv1.IPGroup{*og}), L2Routers([]paasv1.IPGroup{*cg}))
	}
	on, ok1 := old.(*corev1.Node)
	cn, ok2 := cur.(*corev1.Node)
	if !ok1 || !ok2 {
		return true // ServiceCIDRs are immutable but for deletion: rare, always refresh
	}
	return !equality.Semantic.DeepEqual(on.Status.Addresses, cn.Status.Addresses) ||
		!slices.Equal(on.Spec.PodCIDRs, cn.Spec.PodCIDRs) ||
		on.Annotations[paasv1.NodeInterfacesAnnotation] != cn.Annotations[paasv1.NodeInterfacesAnnotation]
}

// ServiceCIDRs reports whether the API server serves ServiceCIDR objects,
// which then reserve addresses and are watched.
func (s *Source) ServiceCIDRs() bool { return s.watchServiceCIDRs }
