package controllers

import (
	"context"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// BGPPeerReconciler tells on each BGPPeer whether the agents use it. The API
// server validates BGPPeers (CEL), but this version's agents announce by ARP
// and NDP only, so every peer is marked not accepted, with the way out: a
// peer must never look silently in use.
type BGPPeerReconciler struct {
	Client client.Client
}

// bgpPeerAccepted is the Accepted condition of every BGPPeer in this version.
func bgpPeerAccepted(generation int64) metav1.Condition {
	return metav1.Condition{
		Type:               paasv1.BGPPeerAccepted,
		Status:             metav1.ConditionFalse,
		Reason:             paasv1.ReasonBGPNotEnabled,
		ObservedGeneration: generation,
		Message:            "the peer is valid, but this version's agents do not speak BGP yet: nothing is advertised to it; announce the IPGroups' VIPs with announce.mode L2, or None with static routes to the nodes",
	}
}

// +kubebuilder:rbac:groups=paas.org,resources=bgppeers,verbs=get;list;watch
// +kubebuilder:rbac:groups=paas.org,resources=bgppeers/status,verbs=get;update;patch

func (r *BGPPeerReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var peer paasv1.BGPPeer
	if err := r.Client.Get(ctx, req.NamespacedName, &peer); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	patch := client.MergeFrom(peer.DeepCopy())
	if !meta.SetStatusCondition(&peer.Status.Conditions, bgpPeerAccepted(peer.Generation)) {
		return ctrl.Result{}, nil
	}
	return ctrl.Result{}, r.Client.Status().Patch(ctx, &peer, patch)
}

func (r *BGPPeerReconciler) SetupWithManager(mgr ctrl.Manager) error {
	return ctrl.NewControllerManagedBy(mgr).Named("bgppeer").For(&paasv1.BGPPeer{}).Complete(r)
}
