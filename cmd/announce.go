package cmd

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"

	"github.com/hashicorp/memberlist"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/manager"

	"github.com/paas-org/vip-allocator-operator/nodeagent"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
	"github.com/paas-org/vip-allocator-operator/nodeagent/l2"
	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
)

// l2Options are the agent's flags for layer-2 announcement.
type l2Options struct {
	namespace     string
	port          int
	bindAddress   string
	handoverDelay time.Duration
	probePeriod   time.Duration
	onStop        string // auto, handover or restart
	timers        string // liveness timer preset: tuned or lan
	// handoff sends the mid-stream TCP segments of VIPs taken over in a planned
	// move on to the previous owner (nil: off).
	handoff func(dataplane.Handoffs) error
}

// settleAlone is how long an agent that sees no other agent waits before it
// announces anything: long enough for agents started together to find each other.
const settleAlone = 5 * time.Second

// runningAnnouncer is the layer-2 side of a running agent.
type runningAnnouncer struct {
	cluster *membership.Cluster
	speaker *l2.Speaker
	delay   time.Duration
	// leaving decides, when the agent stops, whether the node is going away
	// (hand the VIPs over) or only the agent restarts (keep them).
	leaving  func() bool
	once     sync.Once
	handover bool
	bgp      *bgp.Speaker
}

// startAnnouncer joins the other agents and registers the announcer with mgr.
// When ctx ends (SIGTERM), the agent tells the others it is draining at once,
// so they take its VIPs over while it still answers; stop finishes that.
func startAnnouncer(ctx context.Context, cfg *rest.Config, mgr manager.Manager, o nodeagent.Options, opts l2Options) (*runningAnnouncer, error) {
	log := ctrl.Log.WithName("announce")
	direct, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, err
	}
	key, err := gossipKey(ctx, direct, opts.namespace)
	if err != nil {
		return nil, err
	}
	bind, err := bindAddress(ctx, direct, o.NodeName, opts.bindAddress)
	if err != nil {
		return nil, err
	}
	timers, err := livenessTimers(opts.timers)
	if err != nil {
		return nil, err
	}
	cluster, err := membership.Start(membership.Config{NodeName: o.NodeName, BindAddr: bind, Port: opts.port, Key: key, Timers: timers, Log: log.WithName("memberlist")})
	if err != nil {
		return nil, fmt.Errorf("start liveness gossip on %s: %w", bind, err)
	}
	started := time.Now()
	r := &runningAnnouncer{cluster: cluster, delay: opts.handoverDelay, leaving: func() bool {
		switch opts.onStop {
		case "handover":
			return true
		case "restart":
			return false
		}
		return nodeLeaving(direct, o.NodeName)
	}}
	joinOthers(ctx, direct, cluster, o.NodeName)

	a := &nodeagent.Announcer{
		Client:        mgr.GetClient(),
		Recorder:      mgr.GetEventRecorderFor("vip-allocator-agent"),
		NodeName:      o.NodeName,
		OwnClassOnly:  o.OwnClassOnly,
		Liveness:      liveness{cluster},
		HandoverDelay: opts.handoverDelay,
		Handoff:       opts.handoff,
		// Settled once another agent is seen, or after a few seconds alone
		// (the first agent of a cluster, or a one-node cluster).
		Settled: func() bool { return len(cluster.Members()) > 1 || time.Since(started) > settleAlone },
	}
	r.speaker = l2.NewSpeaker(log.WithName("l2"), a.OurMACs(ctx), opts.probePeriod)
	a.Speaker = r.speaker
	// The BGP speaker stays idle (no session, no port) until a BGPPeer
	// selects this node.
	r.bgp = bgp.New(log.WithName("bgp"))
	a.BGP = &nodeagent.BGPAnnouncer{Client: mgr.GetClient(), NodeName: o.NodeName, Speaker: r.bgp,
		Passwords: bgpPasswords(direct, opts.namespace)}
	if err := a.SetupWithManager(mgr); err != nil {
		return nil, err
	}
	runnables := []manager.RunnableFunc{
		(&nodeagent.InterfacePublisher{Client: mgr.GetClient(), NodeName: o.NodeName, Period: 30 * time.Second}).Start,
		func(ctx context.Context) error { a.ReportConflicts(ctx); return nil },
		a.BGP.RecordAdvertisers,
		a.BGP.ReportSessions,
		// Heal partitions and pick up nodes that joined: join every Node
		// not in the membership now and then.
		func(ctx context.Context) error {
			wait.UntilWithContext(ctx, func(ctx context.Context) { joinOthers(ctx, mgr.GetClient(), cluster, o.NodeName) }, 5*time.Second)
			return nil
		},
	}
	for _, run := range runnables {
		if err := mgr.Add(run); err != nil {
			return nil, err
		}
	}
	go func() {
		<-ctx.Done()
		r.announceStop()
	}()
	return r, nil
}

// announceStop tells the other agents this one stops, once: Draining when the
// node goes away (they take its VIPs and send gratuitous ARP while it still
// answers), Restarting when only the agent restarts (they keep counting the
// node alive, so no VIP moves; its rules keep forwarding meanwhile).
func (r *runningAnnouncer) announceStop() {
	r.once.Do(func() {
		r.handover = r.leaving()
		state := membership.Restarting
		if r.handover {
			state = membership.Draining
		}
		ctrl.Log.Info("agent stopping", "announcing", state)
		if err := r.cluster.SetState(state); err != nil {
			ctrl.Log.Error(err, "announce stop", "state", state)
		}
	})
}

// stop finishes: BGP first (routes withdrawn, or kept by routers with
// graceful restart when only the agent restarts; see bgp.Speaker.Shutdown),
// then, after a hand-over, it waits until the new owners have taken over, goes
// quiet and leaves.
func (r *runningAnnouncer) stop() {
	r.announceStop()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	r.bgp.Shutdown(ctx, !r.handover)
	cancel()
	if !r.handover {
		r.speaker.Close()
		_ = r.cluster.Shutdown()
		return
	}
	time.Sleep(r.delay)
	r.speaker.Close()
	if err := r.cluster.Leave(time.Second); err != nil {
		ctrl.Log.Error(err, "leave the liveness gossip")
	}
	_ = r.cluster.Shutdown()
}

// nodeLeaving reports whether this node is going away rather than only its
// agent restarting: cordoned (drain), being deleted, or not Ready (a node
// shutting down gracefully reports so). When the API server cannot tell, it
// says yes: moving VIPs is safe, holding them for a node that is gone is not.
func nodeLeaving(c client.Client, name string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: name}, &n); err != nil {
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

// livenessTimers is a named preset of failure-detection timers: tuned (about
// a second to declare a dead node dead) or lan (memberlist's defaults, about
// five: the baseline of make bench-failover).
func livenessTimers(preset string) (membership.Timers, error) {
	switch preset {
	case "", "tuned":
		return membership.TunedTimers(), nil
	case "lan":
		return membership.TimersOf(memberlist.DefaultLANConfig()), nil
	}
	return membership.Timers{}, fmt.Errorf("--liveness-timers %q: want tuned or lan", preset)
}

// liveness adapts membership to what the announcer needs.
type liveness struct{ c *membership.Cluster }

func (l liveness) Alive() map[string]bool {
	out := map[string]bool{}
	for name, st := range l.c.Members() {
		out[name] = st == membership.Draining
	}
	return out
}

func (l liveness) Changed() <-chan struct{} { return l.c.Changed() }

// bgpPasswords reads the BGP peers' passwords from the Secret the operator
// fills, at most every few seconds: every announce pass asks.
func bgpPasswords(c client.Client, namespace string) func(context.Context) (map[string]string, error) {
	var (
		mu      sync.Mutex
		read    time.Time
		current map[string]string
	)
	return func(ctx context.Context) (map[string]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(read) < 5*time.Second {
			return current, nil
		}
		var s corev1.Secret
		key := client.ObjectKey{Namespace: namespace, Name: paasv1.BGPPasswordsSecret}
		err := c.Get(ctx, key, &s)
		if err != nil && !apierrors.IsNotFound(err) {
			return nil, err // asked again on the next pass
		}
		// Not found: no password copied yet, which is an answer too (cached
		// like one, so a peer waiting for its Secret costs no GET per pass).
		current = map[string]string{}
		for peer, pw := range s.Data {
			current[peer] = string(pw)
		}
		read = time.Now()
		return current, nil
	}
}

// gossipKey reads the agents' shared key from the Secret the operator
// creates, waiting a minute for it on a fresh install.
func gossipKey(ctx context.Context, c client.Client, namespace string) ([]byte, error) {
	var secret corev1.Secret
	name := client.ObjectKey{Namespace: namespace, Name: paasv1.MemberlistSecret}
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, name, &secret)
		if err != nil {
			ctrl.Log.Info("waiting for the gossip key Secret (the operator creates it)", "secret", name, "error", err.Error())
		}
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read Secret %s (created by the operator; is it running?): %w", name, err)
	}
	key := secret.Data[paasv1.MemberlistKey]
	if n := len(key); n != 16 && n != 24 && n != 32 {
		return nil, fmt.Errorf("Secret %s: key %q holds %d bytes, want 16, 24 or 32", name, paasv1.MemberlistKey, n)
	}
	return key, nil
}

// bindAddress is the flag's address or else the Node's first InternalIP.
func bindAddress(ctx context.Context, c client.Client, node, flag string) (netip.Addr, error) {
	if flag != "" {
		return netip.ParseAddr(flag)
	}
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return netip.Addr{}, fmt.Errorf("get Node %s for its address: %w", node, err)
	}
	if ips := election.InternalIPs(&n); len(ips) > 0 {
		return ips[0], nil
	}
	return netip.Addr{}, fmt.Errorf("Node %s has no InternalIP: set --bind-address", node)
}

// joinOthers joins the agents of the Nodes not in the membership yet.
func joinOthers(ctx context.Context, c client.Reader, cluster *membership.Cluster, self string) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes); err != nil {
		ctrl.Log.Error(err, "list Nodes to join their agents")
		return
	}
	members := cluster.Members()
	var addrs []string
	for i := range nodes.Items {
		n := &nodes.Items[i]
		if _, in := members[n.Name]; in || n.Name == self {
			continue
		}
		if ips := election.InternalIPs(n); len(ips) > 0 {
			addrs = append(addrs, ips[0].String())
		}
	}
	if len(addrs) == 0 {
		return
	}
	if joined, err := cluster.Join(addrs); err != nil && joined == 0 {
		ctrl.Log.V(1).Info("no other agent reachable yet", "tried", len(addrs), "error", err.Error())
	}
}
