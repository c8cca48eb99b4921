package nodeagent

import (
	"cmp"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/manager"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/metricsauth"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
	"github.com/paas-org/vip-allocator-operator/nodeagent/announce"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
	"github.com/paas-org/vip-allocator-operator/nodeagent/changes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
	"github.com/paas-org/vip-allocator-operator/nodeagent/facts"
	"github.com/paas-org/vip-allocator-operator/nodeagent/gossip"
	"github.com/paas-org/vip-allocator-operator/nodeagent/l2"
	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/proxy"
	"github.com/paas-org/vip-allocator-operator/nodeagent/returnpath"
)

// Config is the running agent's configuration: its flags.
type Config struct {
	proxy.Options
	Scheme *runtime.Scheme
	// Plane and MasqueradeBit configure the data planes (dataplane.Config).
	Plane         string
	MasqueradeBit int
	// Namespace is the operator's: it holds the gossip key and BGP passwords.
	Namespace      string
	MemberlistPort int
	// BindAddress is this node's gossip address; empty: the Node's InternalIP.
	BindAddress    string
	HandoverDelay  time.Duration
	ARPProbePeriod time.Duration
	// Probe is how an address is probed before its first announcement.
	Probe announce.ProbeConfig
	// FailoverHistory is how many ownership changes each IP object keeps in
	// status.history (0: announce.DefaultHistoryLimit).
	FailoverHistory int
	// BGPGracefulShutdown is how long the routes this node stops advertising
	// (cordon, drain, exclusion, a stop that hands over) are advertised in
	// graceful shutdown (RFC 8326) before their withdrawal; 0: withdrawn at once.
	BGPGracefulShutdown time.Duration
	// GossipKeyPoll is how often the gossip Secret is read for rotation
	// steps (0: gossip.KeyPoll).
	GossipKeyPoll time.Duration
	OnStop        string // OnStopAuto, OnStopHandover or OnStopRestart
	// OnCordon is what cordoning a node does to its VIPs (the operator's
	// --on-cordon, which it passes to the agents it deploys).
	OnCordon       election.OnCordon
	LivenessTimers string // gossip.TimersTuned or gossip.TimersLAN
	// ConnectionHandoff sends the open connections of VIPs taken over in a
	// planned move on to their previous owner.
	ConnectionHandoff bool
	// ReturnPaths sends the replies to a VIP back by the interface its
	// requests came in on (package returnpath); off: by the main table.
	ReturnPaths bool
	// ReturnLayout is where the ways back's marks and tables are (the zero value:
	// returnplan.DefaultLayout).
	ReturnLayout returnplan.Layout
	// DaemonSet ("namespace/name") runs this agent: on stop its rules are
	// removed when it is gone (uninstall); empty: always kept.
	DaemonSet              string
	MetricsAddr, ProbeAddr string
	// PprofAddr serves Go's profiles (empty: not at all).
	PprofAddr string
	// MetricsSecure serves metrics over TLS to authorized callers only (internal/metricsauth).
	MetricsSecure bool
}

// reportSettle is how long a refusal lasts before the agent reports it (see
// proxy.Reporter.Settle).
const reportSettle = 2 * time.Second

// Server is a running node agent: the data planes, the announcer and the
// liveness gossip. Start it, and Stop it when its context ends; Run does both.
type Server struct {
	cfg       Config
	mgr       manager.Manager
	syncer    *proxy.Syncer
	direct    client.WithWatch // the API server itself: Secrets, and the Node once the cache stops
	daemonSet *types.NamespacedName
	// dsDeleted is whether this agent saw its DaemonSet deleted (an uninstall);
	// the watch outlives the manager until Stop has decided.
	dsDeleted *DeletionWatch
	stopWatch context.CancelFunc
	shutdown  *shutdown
	// unviewed reads the Nodes of the agents that publish no NodeView
	// (nodes.Unviewed), for the data path, the announcer and the gossip.
	unviewed *nodes.Unviewed

	cancel context.CancelFunc
	done   chan struct{} // closed when the manager has returned
	mgrErr error
}

// NewServer opens the data planes and builds the manager; nothing runs yet.
func NewServer(rc *rest.Config, cfg Config) (*Server, error) {
	s := &Server{cfg: cfg, syncer: &proxy.Syncer{Options: cfg.Options}}
	if cfg.DaemonSet != "" {
		key, err := ParseDaemonSet(cfg.DaemonSet)
		if err != nil {
			return nil, err
		}
		s.daemonSet = &key
	}
	for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
		p, fallback, err := dataplane.Open(dataplane.Config{Family: fam, Plane: cfg.Plane, MasqueradeBit: cfg.MasqueradeBit})
		if err != nil {
			if fam == dataplane.IPv6 {
				ctrl.Log.Info("no IPv6 data plane on this node", "reason", err.Error())
				continue
			}
			return nil, err
		}
		if fallback != nil {
			ctrl.Log.Info("nftables refused our ruleset: using iptables", "family", fam, "reason", fallback.Error())
		}
		ctrl.Log.Info("data plane", "family", fam, "backend", p.Backend())
		s.syncer.Planes = append(s.syncer.Planes, p)
	}
	var err error
	if s.direct, err = client.NewWithWatch(rc, client.Options{Scheme: cfg.Scheme}); err != nil {
		return nil, fmt.Errorf("create client: %w", err)
	}
	metricsAddr := cfg.MetricsAddr
	if metricsAddr == "" {
		node, err := readNode(s.direct, cfg.NodeName)()
		if err != nil {
			return nil, fmt.Errorf("read this node's InternalIP to serve metrics on: %w", err)
		}
		if metricsAddr, err = MetricsBindAddress("", node); err != nil {
			return nil, err
		}
	}
	s.mgr, err = ctrl.NewManager(rc, ctrl.Options{
		Scheme:                 cfg.Scheme,
		Metrics:                metricsauth.Options(metricsAddr, cfg.MetricsSecure, ""),
		HealthProbeBindAddress: cfg.ProbeAddr,
		PprofBindAddress:       cfg.PprofAddr,
		Cache:                  nodes.CacheOptions(cfg.NodeName),
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	s.syncer.Client = s.mgr.GetClient()
	s.unviewed = &nodes.Unviewed{Direct: s.direct}
	s.syncer.Unviewed = s.unviewed
	s.syncer.Reporter = &proxy.Reporter{Client: s.mgr.GetClient(), Recorder: s.recorder(),
		NodeName: cfg.NodeName, Settle: reportSettle}
	// The data path and the announcer both list a Service's EndpointSlices.
	if err := changes.IndexEndpointSlices(context.Background(), s.mgr.GetFieldIndexer()); err != nil {
		return nil, err
	}
	if err := s.syncer.SetupWithManager(s.mgr); err != nil {
		return nil, err
	}
	if err := (&nodes.ViewPublisher{Client: s.mgr.GetClient(), NodeName: cfg.NodeName}).SetupWithManager(s.mgr); err != nil {
		return nil, err
	}
	if err := s.setupReturnPaths(); err != nil {
		return nil, err
	}
	if err := s.mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return s, nil
}

// Run starts the agent and stops it when ctx ends (SIGTERM) or the manager
// fails.
func (s *Server) Run(ctx context.Context) error {
	if err := s.Start(ctx); err != nil {
		return err
	}
	select {
	case <-ctx.Done():
	case <-s.done:
	}
	return s.Stop()
}

// Start joins the other agents, registers the announcer and starts the
// manager. When ctx ends the agent tells the others at once whether it drains
// or restarts (the shutdown protocol), so they act while it still answers.
func (s *Server) Start(ctx context.Context) error {
	ctx, s.cancel = context.WithCancel(ctx)
	if err := s.startAnnouncing(ctx); err != nil {
		s.cancel()
		return err
	}
	if s.daemonSet != nil {
		// Watched until the agent stops: what it saw decides, on the way out,
		// whether a refused token is an uninstall (see JudgeStop).
		var watchCtx context.Context
		watchCtx, s.stopWatch = context.WithCancel(context.Background())
		s.dsDeleted = WatchDeletion(watchCtx, s.direct, *s.daemonSet)
	}
	s.done = make(chan struct{})
	go func() {
		s.mgrErr = s.mgr.Start(ctx)
		close(s.done)
	}()
	go func() {
		<-ctx.Done()
		s.shutdown.announce()
	}()
	return nil
}

// Stop stops the manager, finishes the shutdown protocol and, when the agent
// is being uninstalled, removes its rules (see TeardownIfUninstalled).
func (s *Server) Stop() error {
	if s.stopWatch != nil {
		defer s.stopWatch()
	}
	s.cancel()
	<-s.done
	s.shutdown.finish()
	if s.mgrErr != nil || s.daemonSet == nil {
		return s.mgrErr
	}
	verdict, err := TeardownIfUninstalled(s.direct, *s.daemonSet, s.cfg.NodeName, s.dsDeleted, s.shutdown.beforeCleanup(func() error { return CleanupRulesIn(s.cfg.returnLayout()) }))
	ctrl.Log.Info("agent stopping", "removeRules", verdict.Uninstall, "why", verdict.Why)
	return err
}

// startAnnouncing joins the liveness gossip and registers the announcer (L2
// and BGP) and its helpers with the manager.
func (s *Server) startAnnouncing(ctx context.Context) error {
	g, err := s.joinGossip(ctx)
	if err != nil {
		return err
	}
	a := s.announcer(g)
	if err := s.serveFacts(a, g); err != nil {
		return err
	}
	s.shutdown = &shutdown{gossip: g.cluster, l2: a.Speaker, bgp: a.BGP.Speaker, handoverDelay: s.cfg.HandoverDelay, bgpGracefulShutdown: s.cfg.BGPGracefulShutdown,
		sleep: time.Sleep, log: ctrl.Log,
		leaving: leavingPolicy(s.cfg.OnStop, readNode(s.direct, s.cfg.NodeName))}
	if err := a.SetupWithManager(s.mgr); err != nil {
		return err
	}
	return s.addAnnounceRunnables(a, g)
}

// serveFacts serves what this agent knows of its node to explain, beside
// its metrics and authorized like them (package facts). Metrics served in
// the clear (--metrics-secure=false) get no such neighbour: what a node
// carries and holds in its kernel is not for anyone on the LAN.
func (s *Server) serveFacts(a *announce.Announcer, g *joined) error {
	if !s.cfg.MetricsSecure {
		ctrl.Log.Info("not serving " + agentfacts.Path + ": metrics are served without authorization (--metrics-secure=false)")
		return nil
	}
	h := &facts.Handler{NodeName: s.cfg.NodeName, OnCordon: string(cmp.Or(s.cfg.OnCordon, election.OnCordonHandover)),
		Alive: gossip.Liveness{Cluster: g.cluster}.AliveDraining, Answering: a.Speaker.Owned, Planes: s.syncer.Planes, Announced: a.Speaker.FirstAnnounced, AdjOut: a.BGP.Speaker.AdjOut, Now: time.Now}
	h.Forward = s.forwardFacts
	if err := s.mgr.AddMetricsServerExtraHandler(agentfacts.Path, h); err != nil {
		return fmt.Errorf("serve %s: %w", agentfacts.Path, err)
	}
	return nil
}

// forwardFacts asks the agent of node, at its Node's InternalIP on the metrics port, for
// its facts (explain reaches one agent through a Service and names the node it asks
// about). Only a Node's kubelet-written address is dialled, never one the caller names, and
// the caller's token goes along for that agent to check again. Its certificate is
// self-signed in memory, so it is not verified: the token is an explain token, worth
// nothing but this path (agentfacts.ExplainAudience).
func (s *Server) forwardFacts(ctx context.Context, node string, q url.Values, authorization string) ([]byte, int, error) {
	all, err := nodes.ListOnly(ctx, s.mgr.GetClient(), s.unviewed)
	if err != nil {
		return nil, 0, err
	}
	var target *corev1.Node
	for i := range all {
		if all[i].Name == node {
			target = &all[i]
		}
	}
	if target == nil {
		return nil, 0, fmt.Errorf("no node %s", node)
	}
	ips := election.InternalIPs(target)
	if len(ips) == 0 {
		return nil, 0, fmt.Errorf("node %s lists no InternalIP", node)
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u := url.URL{Scheme: "https", Host: net.JoinHostPort(ips[0].String(), strconv.Itoa(paasv1.AgentMetricsPort)), Path: agentfacts.Path, RawQuery: q.Encode()}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, 0, err
	}
	req.Header.Set("Authorization", authorization)
	resp, err := factsClient.Do(req)
	if err != nil {
		return nil, 0, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return body, resp.StatusCode, err
}

// factsClient dials the other agents' metrics servers (forwardFacts).
var factsClient = &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}} //nolint:gosec // see forwardFacts

// joined is this agent's place in the gossip: the cluster, the node index it
// admits members from, the kick that asks for a round of joins, and when it
// started.
type joined struct {
	cluster *membership.Cluster
	index   *nodes.Index
	kick    chan struct{}
	started time.Time
}

// joinGossip publishes this node, starts its gossip and joins the agents of
// the Nodes it can read before the cache runs.
func (s *Server) joinGossip(ctx context.Context) (*joined, error) {
	node := s.cfg.NodeName
	keys, err := gossip.Keys(ctx, s.direct, s.cfg.Namespace)
	if err != nil {
		return nil, err
	}
	bind, err := gossip.BindAddress(ctx, s.direct, node, s.cfg.BindAddress)
	if err != nil {
		return nil, err
	}
	timers, err := gossip.Timers(s.cfg.LivenessTimers)
	if err != nil {
		return nil, err
	}
	// This node's interfaces and view are published before its gossip
	// starts, so an agent that hears it can place it at once (an agent
	// admits a member only from the addresses of a Node it reads).
	s.publishSelf(ctx)
	// A member named by the gossip that this agent cannot place yet is
	// looked up and joined in the next round (at once, not in 5 s): until
	// then the two agents count different members and elect differently.
	g := &joined{kick: make(chan struct{}, 1)}
	g.index = &nodes.Index{Unknown: func(name string) {
		s.unviewed.Ask(name)
		select {
		case g.kick <- struct{}{}:
		default:
		}
	}}
	g.cluster, err = gossip.Start(membership.Config{NodeName: node, BindAddr: bind, Port: s.cfg.MemberlistPort, Keys: keys, Timers: timers,
		Admit: g.index.AdmitMember, Log: ctrl.Log.WithName("announce").WithName("memberlist")})
	if err != nil {
		return nil, err
	}
	g.started = time.Now()
	registerCounterFunc("vip_allocator_agent_gossip_members_rejected_total",
		"Gossip alive claims not believed: the member names a Node whose InternalIPs do not hold the address it advertises (or no Node yet), or the claim came from another address and the member did not answer at its own.",
		g.cluster.Rejected)
	// Before the cache runs: this node's Node and the views, from the API server.
	gossip.JoinOthers(ctx, func(ctx context.Context) ([]corev1.Node, error) {
		return nodes.ListOnly(ctx, s.direct, nil, client.MatchingFields{"metadata.name": node})
	}, g.cluster, node, g.index)
	s.unviewed.Members = func() []string { return slices.Collect(maps.Keys(g.cluster.Members())) }
	return g, nil
}

// announcer is the announcer of this node, L2 and BGP, deciding from what g
// says of the other agents.
func (s *Server) announcer(g *joined) *announce.Announcer {
	log := ctrl.Log.WithName("announce")
	a := &announce.Announcer{
		Client:         s.mgr.GetClient(),
		Recorder:       s.recorder(),
		NodeName:       s.cfg.NodeName,
		Index:          g.index,
		Unviewed:       s.unviewed,
		OwnClassOnly:   s.cfg.OwnClassOnly,
		Liveness:       gossip.Liveness{Cluster: g.cluster},
		HandoverDelay:  s.cfg.HandoverDelay,
		Probe:          s.cfg.Probe,
		HistoryLimit:   s.cfg.FailoverHistory,
		OnCordon:       s.cfg.OnCordon,
		LocalAddresses: s.cfg.LocalAddresses,
		Settled:        gossip.Settled(g.cluster, g.index, g.started),
	}
	if s.cfg.ConnectionHandoff {
		a.Handoff, a.Nodes = s.syncer.Handoff, s.direct
	}
	a.Speaker = l2.NewSpeaker(log.WithName("l2"), a.OurMACs(), s.cfg.ARPProbePeriod)
	registerCounterFunc("vip_allocator_agent_arp_claims_ignored_total",
		"ARP packets or IPv6 Neighbor Advertisements claiming a VIP this node announces that were not looked at: the same MAC looked at within a minute, or over the rate limits (per VIP and for the node). A steady rise is a flood on the LAN.",
		a.Speaker.ClaimsIgnored)
	// The BGP speaker stays idle (no session, no port) until a BGPPeer
	// selects this node.
	speaker := bgp.New(log.WithName("bgp"))
	speaker.GracefulShutdown = s.cfg.BGPGracefulShutdown
	speaker.OnBFDChange(announce.CountBFDChange)
	a.BGP = &announce.BGPAnnouncer{Client: s.mgr.GetClient(), NodeName: s.cfg.NodeName, Speaker: speaker, Passwords: announce.BGPPasswords(s.direct, s.cfg.Namespace),
		LocalAddresses:   s.cfg.LocalAddresses,
		GracefulShutdown: s.cfg.BGPGracefulShutdown, HistoryLimit: s.cfg.FailoverHistory}
	return a
}

// addAnnounceRunnables adds to the manager what runs beside the announcer:
// the interface publisher, the conflict and BGP reporters, the rounds of
// joins and the key rotation.
func (s *Server) addAnnounceRunnables(a *announce.Announcer, g *joined) error {
	node := s.cfg.NodeName
	listed := func(ctx context.Context) ([]corev1.Node, error) {
		return nodes.ListOnly(ctx, s.mgr.GetClient(), s.unviewed)
	}
	runnables := []manager.RunnableFunc{
		(&nodes.InterfacePublisher{Client: s.mgr.GetClient(), NodeName: node, Period: 30 * time.Second}).Start,
		func(ctx context.Context) error { a.ReportConflicts(ctx); return nil },
		a.BGP.RecordAdvertisers,
		a.BGP.ReportSessions,
		// Heal partitions and pick up nodes that joined: join every Node
		// not in the membership now and then.
		func(ctx context.Context) error {
			gossip.JoinRounds(ctx, g.kick, func() { gossip.JoinOthers(ctx, listed, g.cluster, node, g.index) })
			return nil
		},
		// Key rotation: the Secret is read directly (the agent may get
		// only this one Secret, so there is no watch to follow).
		func(ctx context.Context) error {
			gossip.FollowKeys(ctx, s.direct, s.cfg.Namespace, g.cluster, cmp.Or(s.cfg.GossipKeyPoll, gossip.KeyPoll))
			return nil
		},
	}
	for _, run := range runnables {
		if err := s.mgr.Add(run); err != nil {
			return err
		}
	}
	return nil
}

// publishSelf publishes this node's interfaces and its view straight to the
// API server (the manager and its cache do not run yet). A failure is only
// logged: both publishers run again in the manager, and until the view
// exists the other agents read this node's Node (nodes.List).
func (s *Server) publishSelf(ctx context.Context) {
	node := s.cfg.NodeName
	if err := (&nodes.InterfacePublisher{Client: s.direct, NodeName: node}).Publish(ctx); err != nil {
		ctrl.Log.Error(err, "publish this node's interfaces before joining the gossip")
		return
	}
	if _, err := (&nodes.ViewPublisher{Client: s.direct, NodeName: node}).Reconcile(ctx, reconcile.Request{}); err != nil {
		ctrl.Log.Error(err, "publish this node's view before joining the gossip")
	}
}

// setupReturnPaths runs the returnpath.Keeper over the data planes, when on.
func (s *Server) setupReturnPaths() error {
	l := s.cfg.returnLayout()
	if !s.cfg.ReturnPaths {
		// Off means replies by the main table: an earlier run's rules and tables go (its
		// marks, without them, steer nothing; `agent cleanup` removes those too).
		return returnpath.Cleanup(l)
	}
	if err := l.Validate(s.cfg.MasqueradeBit); err != nil {
		return err
	}
	if err := returnpath.CheckClashes(l); err != nil {
		return err
	}
	k := &returnpath.Keeper{Client: s.mgr.GetClient(), Period: s.cfg.CheckPeriod, Layout: l,
		Recorder: s.recorder(), NodeName: s.cfg.NodeName}
	for _, p := range s.syncer.Planes {
		k.Planes = append(k.Planes, p)
	}
	return k.SetupWithManager(s.mgr)
}

// CleanupRules removes every rule, chain and table any agent wrote on this
// node (the policy routing rules and tables of package returnpath too), with either data plane (`vip-allocator agent cleanup`, and an
// uninstall).
func CleanupRules() error { return CleanupRulesIn(returnplan.DefaultLayout) }

// returnLayout is c.ReturnLayout, or the default one.
func (c Config) returnLayout() returnplan.Layout {
	if c.ReturnLayout == (returnplan.Layout{}) {
		return returnplan.DefaultLayout
	}
	return c.ReturnLayout
}

// CleanupRulesIn is CleanupRules with the ways back in l's marks and tables.
func CleanupRulesIn(l returnplan.Layout) error {
	var errs []error
	for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
		if err := dataplane.CleanupAll(dataplane.Config{Family: fam}); err != nil {
			errs = append(errs, fmt.Errorf("clean up %s rules: %w", fam, err))
		}
	}
	if err := returnpath.Cleanup(l); err != nil {
		errs = append(errs, fmt.Errorf("clean up the ways back: %w", err))
	}
	return errors.Join(errs...)
}

// recorder is the agent's event recorder.
func (s *Server) recorder() record.EventRecorder {
	//nolint:staticcheck // The Events users and tests read are core/v1 Events.
	return s.mgr.GetEventRecorderFor("vip-allocator-agent")
}
