package nodeagent

import (
	"context"
	"sync"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
)

// The shutdown protocol. A stopping agent is either on a node going away
// (drain, deletion, shutdown: its VIPs must move, the new owners first) or
// only restarting (rolling upgrade: no VIP may move, the rules keep
// forwarding meanwhile). On the signal it tells the other agents which, at
// once, so they act while it still answers; once the manager has stopped it
// finishes: BGP first, then layer 2 and the gossip.

// On-stop policies (the agent's --on-stop flag).
const (
	OnStopAuto     = "auto"     // ask the API server about the node
	OnStopHandover = "handover" // always hand the VIPs over
	OnStopRestart  = "restart"  // always keep them
)

// stopGossip is what the protocol needs of the liveness gossip.
type stopGossip interface {
	SetState(membership.State) error
	Leave(timeout time.Duration) error
	Shutdown() error
}

// stopBGP is what the protocol needs of the BGP speaker.
type stopBGP interface {
	// Shutdown advertises the routes in graceful shutdown for a while,
	// withdraws them and closes every session, or, when restarting, closes
	// only the sessions without graceful restart (routers keep the others'
	// routes until the agent is back).
	Shutdown(ctx context.Context, restarting bool)
	// Stop closes every session.
	Stop(ctx context.Context)
}

// shutdown runs the protocol once for a running agent.
type shutdown struct {
	gossip stopGossip
	l2     interface{ Close() }
	bgp    stopBGP
	// leaving decides whether the node goes away (hand the VIPs over) or
	// only the agent restarts (keep them).
	leaving func() bool
	// handoverDelay is how long the VIPs handed over are still answered for
	// (the new owners' gratuitous ARP comes first).
	handoverDelay time.Duration
	// bgpGracefulShutdown is how long the routes are advertised in graceful
	// shutdown before their withdrawal (the speaker's GracefulShutdown): BGP's
	// part of a hand-over has that much more time.
	bgpGracefulShutdown time.Duration
	sleep               func(time.Duration)
	log                 logr.Logger

	once     sync.Once
	handover bool
}

// announce tells the other agents this one stops, once: Draining when the
// node goes away (they take its VIPs and send gratuitous ARP while it still
// answers), Restarting when only the agent restarts (they keep counting the
// node alive, so no VIP moves; its rules keep forwarding meanwhile).
func (s *shutdown) announce() {
	s.once.Do(func() {
		s.handover = s.leaving()
		state := membership.Restarting
		if s.handover {
			state = membership.Draining
		}
		s.log.Info("agent stopping", "announcing", state)
		if err := s.gossip.SetState(state); err != nil {
			s.log.Error(err, "announce stop", "state", state)
		}
	})
}

// finish ends the protocol: BGP first (routes in graceful shutdown, then
// withdrawn, or kept by routers with graceful restart when only the agent
// restarts), then, after a
// hand-over, it waits until the new owners have taken over, goes quiet and
// leaves the gossip; after a restart it goes quiet at once and shuts the
// gossip down without leaving (the others keep counting it alive).
func (s *shutdown) finish() {
	s.announce()
	timeout := 3 * time.Second
	if s.handover {
		timeout += s.bgpGracefulShutdown
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	s.bgp.Shutdown(ctx, !s.handover)
	cancel()
	if !s.handover {
		s.l2.Close()
		_ = s.gossip.Shutdown()
		return
	}
	s.sleep(s.handoverDelay)
	s.l2.Close()
	if err := s.gossip.Leave(time.Second); err != nil {
		s.log.Error(err, "leave the liveness gossip")
	}
	_ = s.gossip.Shutdown()
}

// beforeCleanup returns cleanup preceded by closing every BGP session: on an
// uninstall the sessions a restart would have left to graceful restart must
// close before the rules go, or a router keeps sending to removed rules for
// the restart time.
func (s *shutdown) beforeCleanup(cleanup func() error) func() error {
	return func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		s.bgp.Stop(ctx)
		cancel()
		return cleanup()
	}
}

// leavingPolicy is the on-stop policy as a decision: handover and restart are
// fixed; auto (anything else) asks for the node when the agent stops.
func leavingPolicy(onStop string, node func() (*corev1.Node, error)) func() bool {
	switch onStop {
	case OnStopHandover:
		return func() bool { return true }
	case OnStopRestart:
		return func() bool { return false }
	}
	return func() bool { return nodeLeaving(node()) }
}

// nodeLeaving reports whether node n is going away rather than only its agent
// restarting: cordoned (drain), being deleted, or not Ready (a node shutting
// down gracefully reports so). When the API server cannot tell (err), it says
// yes: moving VIPs is safe, holding them for a node that is gone is not.
func nodeLeaving(n *corev1.Node, err error) bool {
	if err != nil {
		return true
	}
	if n.Spec.Unschedulable || !n.DeletionTimestamp.IsZero() {
		return true
	}
	for _, cond := range n.Status.Conditions {
		if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
			return true
		}
	}
	return false
}

// readNode reads Node name from the API server (not a cache: the manager
// may have stopped), giving up after two seconds.
func readNode(c client.Reader, name string) func() (*corev1.Node, error) {
	return func() (*corev1.Node, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		var n corev1.Node
		if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
			return nil, err
		}
		return &n, nil
	}
}
