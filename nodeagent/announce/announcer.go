package announce

import (
	"context"
	"fmt"
	"net/netip"
	"sync/atomic"
	"time"

	"golang.org/x/sync/errgroup"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	"sigs.k8s.io/controller-runtime/pkg/source"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/changes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
	"github.com/paas-org/vip-allocator-operator/nodeagent/l2"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
)

// Liveness is the agents' view of each other (package membership): which
// agents are alive, and which of those are handing their VIPs over.
type Liveness interface {
	// AliveDraining maps the node name of every alive agent, this one
	// included, to whether it is draining: a name absent is not alive.
	AliveDraining() map[string]bool
	// Changed signals (coalesced) that AliveDraining may return something new.
	Changed() <-chan struct{}
}

// Announcer makes this node answer ARP (IPv4) and NDP (IPv6) for the L2 VIPs
// it owns. Every agent
// computes the same owner for every VIP (package election) from the same
// inputs: the alive agents, the Node objects, the IPGroups and the Services'
// endpoints.
type Announcer struct {
	Client       client.Client
	Recorder     record.EventRecorder
	NodeName     string
	OwnClassOnly bool
	Liveness     Liveness
	Speaker      *l2.Speaker
	// Settled reports whether this agent's view of the others is worth
	// acting on; until then it announces nothing (nil: at once). Right after
	// start an agent may know only itself and would claim every VIP.
	Settled func() bool
	// HandoverDelay is how long a VIP is still answered for after this node
	// lost it while alive: the new owner's gratuitous ARP comes first, then we
	// go quiet, so a planned move drops nothing.
	HandoverDelay time.Duration
	// OnCordon is what cordoning a node does to its VIPs; the election skips
	// excluded nodes whatever it says.
	OnCordon election.OnCordon
	// Probe is how an address is probed before its first announcement
	// (probe.go).
	Probe ProbeConfig
	// HistoryLimit is how many ownership changes each IP object keeps in
	// status.history (0: DefaultHistoryLimit; at most MaxHistoryLimit).
	HistoryLimit int

	// BGP advertises the VIPs of BGP-mode groups (nil: this agent does not
	// speak BGP).
	BGP *BGPAnnouncer

	// LocalAddresses reads this node's own addresses, never announced (nil:
	// from its interfaces, see nodes.LocalAddresses).
	LocalAddresses func() (map[netip.Addr]string, error)

	// Index is the index of the Nodes' MACs and addresses each pass
	// refreshes, for the L2 speaker and the gossip (nil: none kept).
	Index *nodes.Index
	// Unviewed reads the Nodes of the agents that publish no NodeView (nil:
	// none; see nodes.List).
	Unviewed *nodes.Unviewed

	// Handoff programs the data path to send the mid-stream TCP segments of the
	// VIPs this node took over to their previous owners (nil: not at all).
	Handoff func(dataplane.Handoffs) error
	// Nodes reads a Node itself from the API server (the cache holds only
	// this node's): where open connections are handed back to is the
	// previous owner's InternalIP as its kubelet wrote it, never its NodeView.
	Nodes client.Reader

	// last is what the previous pass left; only Reconcile (one worker) uses it.
	last carryover
	// kubeletAddrs are the InternalIPs of the nodes open connections are
	// handed back to, as last read (see internalIPs).
	kubeletAddrs map[string]internalIPsRead
	// changes are what the events said changed since the last pass: a pass
	// looks again only at those Services and VIPs, and what every VIP depends
	// on (the Nodes, the IPGroups' specs, the BGPPeers, the agents' liveness)
	// makes it a full one. seen is what the passes read so far (nil: read
	// everything next).
	changes  changes.Tracker
	seen     *store
	lastFull time.Time
	// probes runs the probes before first announcements (nil: none).
	probes *probes
	// noticed is when (Unix nanoseconds) the first event since the last
	// pass arrived; 0: none did.
	noticed atomic.Int64
}

// notice records that an event arrived, unless an earlier one waits already.
func (a *Announcer) notice() { a.noticed.CompareAndSwap(0, time.Now().UnixNano()) }

// announceRequest is the Announcer's only work item, like the data plane's.
var announceRequest = reconcile.Request{NamespacedName: types.NamespacedName{Name: "announce"}}

// +kubebuilder:rbac:groups=paas.org,resources=ipgroups;ips;virtualips,verbs=get;list;watch
// The agent patches IP status and Nodes; RBAC cannot narrow either to its own
// node's part, the admission policies in config/admission/agent_*.yaml do.
// +kubebuilder:rbac:groups=paas.org,resources=ips/status,verbs=get;patch
// +kubebuilder:rbac:groups="",resources=nodes,verbs=get;list;watch;patch

// Reconcile is one pass: observe, decide, apply.
func (a *Announcer) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	if a.Settled != nil && !a.Settled() {
		// What happened before this agent's view was worth acting on is not
		// what it acts on: its first pass notices everything at once.
		a.noticed.Store(0)
		return reconcile.Result{RequeueAfter: 200 * time.Millisecond}, nil
	}
	start := time.Now()
	noticed := a.noticed.Swap(0)
	ch := a.changes.Take()
	o, self, err := a.observe(ctx, ch)
	if err != nil {
		a.changes.PutBack(ch)
		a.noticed.CompareAndSwap(0, noticed)
		return reconcile.Result{}, err
	}
	if noticed != 0 {
		o.noticed = time.Unix(0, noticed)
	}
	if a.BGP != nil && a.BGP.Speaker != nil {
		o.peers = withOwnSessions(o.peers, a.NodeName, a.BGP.Speaker.Sessions(ctx))
	}
	d, next := decide(announcerPolicy{self: a.NodeName, handoverDelay: a.HandoverDelay, speaksBGP: a.BGP != nil, probe: a.Probe}, o, a.last)
	a.last = next
	a.probeDue(ctx, d.probe)
	kind := "incremental"
	if o.changed == nil {
		kind = "full"
	}
	announceDecideDuration.WithLabelValues(kind).Observe(time.Since(start).Seconds())
	var bgpErr error
	if a.BGP != nil {
		// BGP first: a route needs no election among the agents, and a
		// cordoned node must mark its routes for graceful shutdown at once. A BGP failure must not hold
		// back layer 2: it is returned (and retried) once L2 is done.
		bgpErr = a.BGP.apply(ctx, self, o.peers, d.advertise, d.record)
	}
	a.logChanges(ctx, d, o)
	if err := a.applyL2(ctx, d, o); err != nil {
		return reconcile.Result{}, err
	}
	vipsAnnounced.Set(float64(len(d.own) + len(d.release)))
	agentsAlive.Set(float64(len(o.alive)))
	requeue := d.requeue
	if next := a.fullPassPeriod() - time.Since(a.lastFull); requeue == 0 || next < requeue {
		requeue = max(next, time.Second)
	}
	if a.BGP != nil {
		if r := a.BGP.retryAfter(); r > 0 && (requeue == 0 || r < requeue) {
			requeue = r
		}
	}
	return reconcile.Result{RequeueAfter: requeue}, bgpErr
}

// applyL2 performs the layer-2 side of a decision.
func (a *Announcer) applyL2(ctx context.Context, d decision, o observation) error {
	// Open connections are handed back to the previous owner before the first
	// gratuitous ARP moves their clients here, and for as long as this node
	// still answers for the VIP: clients move on only when the next owner's
	// gratuitous ARP reaches them.
	if a.Handoff != nil {
		h := handoffTargets(d.handOff, a.internalIPs(ctx, d.handOff), a.ownSubnets(o.alive))
		handoffsActive.Set(float64(len(h)))
		if err := a.Handoff(h); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "handing open connections back to previous owners failed")
		}
	}
	if err := a.Speaker.SetAnswering(d.own, d.release); err != nil {
		ctrl.LoggerFrom(ctx).Error(err, "answering ARP/NDP on some interfaces failed")
	}
	// Claims go out several at once: each is one round trip, and a node that
	// comes to own hundreds of VIPs (a burst of new Services, a failover)
	// would otherwise wait for them one after another before its next pass.
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(claimsInFlight)
	for _, vip := range d.claim {
		t, took := d.takeovers[vip]
		g.Go(func() error {
			if !took {
				return a.claim(gctx, vip, o.ledger[vip], nil)
			}
			return a.claim(gctx, vip, o.ledger[vip], &t)
		})
	}
	return g.Wait()
}

// internalIPs are the InternalIPs of the nodes named in from, read from
// their Nodes: a GET each, served from the API server's watch cache, and
// kept for fullPassEvery (a hand-off lasts as long as this node owns the VIP,
// and a node's InternalIP seldom changes). Only nodes that handed a VIP over
// to this one are read. A Node that cannot be read is left out: its
// connections are not handed back this pass.
func (a *Announcer) internalIPs(ctx context.Context, from map[netip.Addr]string) map[string][]netip.Addr {
	out := map[string][]netip.Addr{}
	if a.Nodes == nil {
		return out
	}
	now := time.Now()
	kept := map[string]internalIPsRead{}
	for _, name := range from {
		if _, done := out[name]; done {
			continue
		}
		if r, ok := a.kubeletAddrs[name]; ok && now.Sub(r.at) < fullPassEvery {
			out[name], kept[name] = r.addrs, r
			continue
		}
		var n corev1.Node
		if err := a.Nodes.Get(ctx, client.ObjectKey{Name: name}, &n, nodes.FromWatchCache); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "reading the Node open connections are handed back to failed", "node", name)
			continue
		}
		out[name] = election.InternalIPs(&n)
		kept[name] = internalIPsRead{addrs: out[name], at: now}
	}
	a.kubeletAddrs = kept // only the nodes still handed to
	return out
}

// internalIPsRead are a Node's InternalIPs as read at a time.
type internalIPsRead struct {
	addrs []netip.Addr
	at    time.Time
}

// ownSubnets are the subnets of this node's interfaces, as its agent (this
// one) published them.
func (a *Announcer) ownSubnets(alive []election.Node) []netip.Prefix {
	var out []netip.Prefix
	for _, n := range alive {
		if n.Name != a.NodeName {
			continue
		}
		for _, ifc := range n.Interfaces {
			out = append(out, ifc.Prefix.Masked())
		}
	}
	return out
}

// claimsInFlight is how many claims a pass writes at once; the client's rate
// limit (--kube-api-qps, --kube-api-burst) still bounds them.
const claimsInFlight = 16

// firstAnnouncementWait is how long a claim waits for the VIP's first
// gratuitous announcement to be sent (it is under way as the claim starts,
// and takes a packet's write), to measure its failover gap.
const firstAnnouncementWait = time.Second

// claim records on the ledger entry ip of vip, as listed this pass, that this
// node announces it and, when it took vip over from another node (t), the
// failover in its history: one write.
func (a *Announcer) claim(ctx context.Context, vip netip.Addr, ip *paasv1.IP, t *takeover) error {
	patch := client.MergeFrom(ip.DeepCopy())
	ip.Status.AnnouncedBy = []string{a.NodeName}
	a.markProbed(ip, vip)
	var entry *paasv1.Failover
	if t != nil {
		wait, cancel := context.WithTimeout(ctx, firstAnnouncementWait)
		e := failoverEntry(*t, a.NodeName, a.Speaker.FirstAnnounced(wait, vip))
		cancel()
		ip.Status.History = appendHistory(ip.Status.History, e, a.HistoryLimit)
		entry = &e
	}
	if err := a.Client.Status().Patch(ctx, ip, patch); err != nil {
		return fmt.Errorf("record %s as announced by %s: %w", ip.Name, a.NodeName, err)
	}
	if entry != nil {
		ctrl.LoggerFrom(ctx).Info("failover recorded", "vip", vip, "from", entry.From, "cause", entry.Cause, "gapMilliseconds", entry.GapMilliseconds)
		if entry.GapMilliseconds != nil {
			failoverSeconds.WithLabelValues(string(entry.Cause)).Observe(float64(*entry.GapMilliseconds) / 1000)
		}
	}
	return nil
}

// logChanges logs the VIPs this node takes and gives up, with the view it
// decided from.
func (a *Announcer) logChanges(ctx context.Context, d decision, o observation) {
	if len(d.gained) == 0 && len(d.lost) == 0 {
		return
	}
	ownershipChanges.WithLabelValues("taken").Add(float64(len(d.gained)))
	ownershipChanges.WithLabelValues("handed-over").Add(float64(len(d.lost)))
	names := make([]string, 0, len(o.alive))
	for _, n := range o.alive {
		names = append(names, n.Name)
	}
	ctrl.LoggerFrom(ctx).Info("ownership changed", "taken", d.gained, "handed over", d.lost, "alive", names, "agents", o.known)
}

// SetupWithManager funnels every relevant change, and every change of the
// agents' liveness, into the single announce request.
func (a *Announcer) SetupWithManager(mgr ctrl.Manager) error {
	// Every event says what changed (package changes) before it asks for a pass.
	toAnnounce := handler.EnqueueRequestsFromMapFunc(func(_ context.Context, o client.Object) []reconcile.Request {
		a.notice()
		a.changes.Observe(o)
		return []reconcile.Request{announceRequest}
	})
	if a.Probe = a.Probe.withDefaults(); a.Probe.Tries > 0 {
		a.probes = newProbes(a.Probe)
	}
	changed := make(chan event.GenericEvent, 1)
	go func() {
		for range a.Liveness.Changed() {
			a.notice()
			a.changes.MarkAll()
			select {
			case changed <- event.GenericEvent{Object: &corev1.Node{}}:
			default:
			}
		}
	}()
	return ctrl.NewControllerManagedBy(mgr).
		Named("announce").
		Watches(&corev1.Service{}, toAnnounce).
		Watches(&discoveryv1.EndpointSlice{}, toAnnounce).
		// This node's own Node (the only one the cache holds), and the views
		// of the others, which change only when what is read of them does.
		Watches(&corev1.Node{}, toAnnounce, builder.WithPredicates(nodeAnnounceChanged)).
		Watches(&paasv1.NodeView{}, toAnnounce, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		// An IPGroup's spec says how its VIPs are announced; its status (the
		// operator's counts, rewritten as it allocates) says nothing to us.
		Watches(&paasv1.IPGroup{}, toAnnounce, builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&paasv1.IP{}, toAnnounce).
		Watches(&paasv1.BGPPeer{}, toAnnounce).
		WatchesRawSource(source.Channel(changed, toAnnounce)).
		WatchesRawSource(source.Channel(a.probes.woken(), toAnnounce)).
		Complete(a)
}

// nodeAnnounceChanged passes the Node events that can change an election or
// what may be announced: labels, annotations (the interfaces), spec (cordon),
// addresses, deletion. The kubelet's status updates (conditions, heartbeats
// every few minutes, images) change none of them and would otherwise make
// every agent re-elect every VIP each time any Node reports.
var nodeAnnounceChanged = predicate.Funcs{
	UpdateFunc: func(e event.UpdateEvent) bool {
		old, okOld := e.ObjectOld.(*corev1.Node)
		cur, okCur := e.ObjectNew.(*corev1.Node)
		if !okOld || !okCur {
			return true
		}
		return !equality.Semantic.DeepEqual(old.Labels, cur.Labels) ||
			!equality.Semantic.DeepEqual(old.Annotations, cur.Annotations) ||
			!equality.Semantic.DeepEqual(old.Spec, cur.Spec) ||
			!equality.Semantic.DeepEqual(old.Status.Addresses, cur.Status.Addresses) ||
			!old.DeletionTimestamp.Equal(cur.DeletionTimestamp)
	},
}
