package bgppeer

import (
	"context"
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/internal/predicates"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// Reconciler reports on each BGPPeer whether it is used (Accepted) and
// whether every node that peers with it has its session up (Established),
// from the session entries the agents write, and hands the peers' passwords
// to the agents.
type Reconciler struct {
	Client client.Client
	// Namespace holds the password Secrets and paasv1.BGPPasswordsSecret; the
	// manager's cache must watch Secrets there (and only there).
	Namespace string
	// Recorder records the Warning Event on a peer whose password is kept
	// while its Secret is not valid; nil records none.
	Recorder record.EventRecorder
}

// +kubebuilder:rbac:groups=paas.org,resources=bgppeers,verbs=get;list;watch
// +kubebuilder:rbac:groups=paas.org,resources=bgppeers/status,verbs=get;update;patch

// Reconcile writes each BGPPeer's status from the sessions its agents report.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var peers paasv1.BGPPeerList
	if err := r.Client.List(ctx, &peers); err != nil {
		return ctrl.Result{}, fmt.Errorf("list BGPPeers: %w", err)
	}
	passwordErrs, err := r.syncPasswords(ctx, peers.Items)
	if err != nil {
		return ctrl.Result{}, err
	}
	var peer paasv1.BGPPeer
	if err := r.Client.Get(ctx, req.NamespacedName, &peer); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	var nodes corev1.NodeList
	if err := r.Client.List(ctx, &nodes); err != nil {
		return ctrl.Result{}, fmt.Errorf("list Nodes: %w", err)
	}
	status := peer.Status.DeepCopy()
	selected := peeringNodes(&peer, nodes.Items)
	status.Sessions = sessionsOf(status.Sessions, nodes.Items)
	accepted := acceptedCondition(&peer, passwordErrs[peer.Name], len(selected))
	r.warnKeptPassword(&peer, accepted)
	meta.SetStatusCondition(&status.Conditions, accepted)
	meta.SetStatusCondition(&status.Conditions, establishedCondition(peer.Generation, selected, status.Sessions))
	if c, ok := bfdCondition(&peer, selected, status.Sessions); ok {
		meta.SetStatusCondition(&status.Conditions, c)
	} else {
		meta.RemoveStatusCondition(&status.Conditions, paasv1.BGPPeerBFDUp)
	}
	if equality.Semantic.DeepEqual(status, &peer.Status) {
		return ctrl.Result{}, nil
	}
	patch := client.MergeFrom(peer.DeepCopy())
	peer.Status = *status
	if err := r.Client.Status().Patch(ctx, &peer, patch); client.IgnoreNotFound(err) != nil {
		return ctrl.Result{}, fmt.Errorf("patch BGPPeer %s status: %w", peer.Name, err)
	}
	return ctrl.Result{}, nil
}

// peeringNodes are the names of the nodes running an agent (they publish
// their interfaces) that peer selects.
func peeringNodes(peer *paasv1.BGPPeer, nodes []corev1.Node) []string {
	var out []string
	for i := range nodes {
		if n := election.NodeOf(&nodes[i]); n.Agent && election.PeerSelects(peer, n) {
			out = append(out, n.Name)
		}
	}
	return out
}

// sessionsOf drops the session entries of nodes that no longer exist: their
// agents are gone and cannot remove them.
func sessionsOf(sessions []paasv1.BGPSession, nodes []corev1.Node) []paasv1.BGPSession {
	exists := map[string]bool{}
	for _, n := range nodes {
		exists[n.Name] = true
	}
	var out []paasv1.BGPSession
	for _, s := range sessions {
		if exists[s.Node] {
			out = append(out, s)
		}
	}
	return out
}

// acceptedCondition says whether the agents use the peer. A peer whose
// password is kept while its Secret is not valid is used: the condition is
// True, with the reason and the message that ask for a fix.
func acceptedCondition(peer *paasv1.BGPPeer, passwordErr passwordProblem, nodes int) metav1.Condition {
	c := metav1.Condition{Type: paasv1.BGPPeerAccepted, ObservedGeneration: peer.Generation}
	switch {
	case passwordErr.reason != "" && !passwordErr.kept:
		c.Status, c.Reason, c.Message = metav1.ConditionFalse, passwordErr.reason, passwordErr.message
	case nodes == 0:
		c.Status, c.Reason = metav1.ConditionFalse, paasv1.ReasonNoNodes
		c.Message = "no node running an agent matches spec.nodeSelector: nothing peers with the router; fix the selector or label the nodes"
	case passwordErr.kept:
		c.Status, c.Reason, c.Message = metav1.ConditionTrue, passwordErr.reason, passwordErr.message
	default:
		c.Status, c.Reason = metav1.ConditionTrue, paasv1.ReasonPeerAccepted
		target := peer.Spec.PeerAddress
		if peer.Spec.Interface != "" {
			target = "the router on interface " + peer.Spec.Interface
		}
		c.Message = fmt.Sprintf("the agents of %d node(s) peer with %s (AS %d)", nodes, target, peer.Spec.PeerASN)
	}
	return c
}

// warnKeptPassword records a Warning Event when the peer's Accepted condition
// turns to a kept password (or its message changes): once per change, not per
// reconcile.
func (r *Reconciler) warnKeptPassword(peer *paasv1.BGPPeer, accepted metav1.Condition) {
	if r.Recorder == nil || (accepted.Reason != paasv1.ReasonPasswordSecretMissingKeptLastGood && accepted.Reason != paasv1.ReasonPasswordSecretNotLabelledKeptLastGood) {
		return
	}
	if old := meta.FindStatusCondition(peer.Status.Conditions, paasv1.BGPPeerAccepted); old != nil && old.Reason == accepted.Reason && old.Message == accepted.Message {
		return
	}
	r.Recorder.Event(peer, corev1.EventTypeWarning, paasv1.EventPasswordKeptLastGood, accepted.Message)
}

// establishedCondition summarises the selected nodes' sessions.
func establishedCondition(generation int64, selected []string, sessions []paasv1.BGPSession) metav1.Condition {
	c := metav1.Condition{Type: paasv1.BGPPeerEstablished, ObservedGeneration: generation, Status: metav1.ConditionFalse}
	byNode := map[string]paasv1.BGPSession{}
	for _, s := range sessions {
		byNode[s.Node] = s
	}
	up := 0
	var down []string
	for _, n := range selected {
		s, ok := byNode[n]
		switch {
		case !ok:
			down = append(down, n+": no session reported yet")
		case s.State == paasv1.SessionEstablished:
			up++
		default:
			down = append(down, stateWithReason(n, s.State, s.Message))
		}
	}
	switch {
	case len(selected) == 0:
		c.Reason, c.Message = paasv1.ReasonNoNodes, "no node peers with the router"
	case up == len(selected):
		c.Status, c.Reason = metav1.ConditionTrue, paasv1.ReasonAllEstablished
		c.Message = fmt.Sprintf("%d of %d sessions established", up, len(selected))
	case len(sessions) == 0:
		c.Reason = paasv1.ReasonNoSessionYet
		c.Message = fmt.Sprintf("0 of %d sessions established: no agent reported one yet", len(selected))
	default:
		c.Reason = paasv1.ReasonSessionsDown
		c.Message = fmt.Sprintf("%d of %d sessions established; %s. Check the router's neighbor configuration for these nodes' addresses, its ASN, the password, and that the nodes reach it", up, len(selected), firstN(down, 5))
	}
	return c
}

// bfdCondition says whether the selected nodes' established sessions have
// their BFD session up; ok is false when the peer has no bfd (no condition).
// Sessions not established are the Established condition's business.
func bfdCondition(peer *paasv1.BGPPeer, selected []string, sessions []paasv1.BGPSession) (c metav1.Condition, ok bool) {
	if peer.Spec.BFD == nil {
		return c, false
	}
	c = metav1.Condition{Type: paasv1.BGPPeerBFDUp, ObservedGeneration: peer.Generation, Status: metav1.ConditionFalse}
	byNode := map[string]paasv1.BGPSession{}
	for _, s := range sessions {
		byNode[s.Node] = s
	}
	established, up := 0, 0
	var down []string
	for _, n := range selected {
		s, ok := byNode[n]
		if !ok || s.State != paasv1.SessionEstablished {
			continue
		}
		established++
		switch s.BFD {
		case paasv1.BFDUp:
			up++
		case "", paasv1.BFDNotConfigured:
			down = append(down, n+": the agent reports no BFD yet")
		default:
			down = append(down, stateWithReason(n, s.BFD, s.BFDMessage))
		}
	}
	switch {
	case established == 0:
		c.Status, c.Reason = metav1.ConditionUnknown, paasv1.ReasonNoEstablishedSession
		c.Message = "no session is established: BFD comes up with them (see the Established condition)"
	case up == established:
		c.Status, c.Reason = metav1.ConditionTrue, paasv1.ReasonBFDUp
		c.Message = fmt.Sprintf("BFD is up on %d of %d established sessions", up, established)
	default:
		c.Reason = paasv1.ReasonBFDDown
		c.Message = fmt.Sprintf("BFD is up on %d of %d established sessions; %s. Those sessions fall back on the hold timer: configure BFD for these nodes on the router (FRR: bfdd and 'neighbor <node> bfd'), let UDP 3784 through, or check the path", up, established, firstN(down, 5))
	}
	return c, true
}

// stateWithReason is "node: state (why)", or "node: state" without a why.
func stateWithReason(node, state, why string) string {
	if why == "" {
		return node + ": " + state
	}
	return node + ": " + state + " (" + why + ")"
}

// firstN joins up to n items and says how many more there are.
func firstN(items []string, n int) string {
	if len(items) <= n {
		return strings.Join(items, "; ")
	}
	return fmt.Sprintf("%s; and %d more", strings.Join(items[:n], "; "), len(items)-n)
}

// SetupWithManager reconciles a BGPPeer when it changes, and every peer when
// a Node comes, goes or changes what decides whether it peers, or a Secret of
// the operator's namespace changes (a password set or rotated).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	allPeers := handler.EnqueueRequestsFromMapFunc(func(ctx context.Context, _ client.Object) []reconcile.Request {
		var peers paasv1.BGPPeerList
		if err := mgr.GetClient().List(ctx, &peers); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, p := range peers.Items {
			out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&p)})
		}
		return out
	})
	return ctrl.NewControllerManagedBy(mgr).Named("bgppeer").
		For(&paasv1.BGPPeer{}).
		Watches(&corev1.Node{}, allPeers, builder.WithPredicates(predicate.Funcs{
			UpdateFunc: func(e event.UpdateEvent) bool {
				return predicates.NodeAnnouncingChanged(e.ObjectOld.(*corev1.Node), e.ObjectNew.(*corev1.Node))
			},
		})).
		Watches(&corev1.Secret{}, allPeers, builder.WithPredicates(predicate.NewPredicateFuncs(func(o client.Object) bool {
			return o.GetNamespace() == r.Namespace && o.GetName() != paasv1.BGPPasswordsSecret
		}))).
		Complete(r)
}
