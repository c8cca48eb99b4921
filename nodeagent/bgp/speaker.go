// Package bgp owns the agent's embedded BGP speaker (GoBGP, in process, no
// listening port): the sessions with the routers of the BGPPeers that select
// this node, and the host routes of the VIPs this node advertises on them.
// It is told what to hold (Configure, Advertise) and converges GoBGP to it in
// place: a changed peer is updated, an unrelated session never flaps. It knows
// nothing of Kubernetes; nodeagent decides which VIPs and peers.
package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/google/uuid"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// Peer is one BGP neighbour of this node.
type Peer struct {
	Name      string // the BGPPeer's name
	Address   netip.Addr
	Port      uint16
	PeerASN   uint32
	MyASN     uint32
	Hold      time.Duration
	Keepalive time.Duration
	Password  string
	MultiHop  bool
	// GracefulRestart (RFC 4724): the router keeps this node's routes while
	// the agent restarts (see Shutdown).
	GracefulRestart bool
	// BFD next to the session; the zero value: none.
	BFD BFD
	// Source is the address the session leaves from (the zero value: the
	// kernel's choice).
	Source netip.Addr
	// Interface, when set, makes the session unnumbered (unnumbered.go):
	// Address is left zero by callers, and the speaker fills it with the
	// link-local address of the router it finds on this interface.
	Interface string
	// InterfaceRouter, with Interface, is the router's link-local address on
	// it: the session goes to it alone (the zero value: the one router of a
	// point-to-point link).
	InterfaceRouter netip.Addr
}

// Config is what the speaker peers as.
type Config struct {
	RouterID netip.Addr // IPv4
	Peers    []Peer
}

// Speaker is the node's BGP speaker. Its methods may be called from any
// goroutine.
type Speaker struct {
	log       logr.Logger
	server    *server.BgpServer
	errors    *peerErrors
	bfdErrors *peerErrors // the last reason BFD went down, by neighbour address
	bfd       bfdTracker
	bfdRun    *bfdSessions
	links     *linkAdvertisers // on the links of unnumbered peers
	done      chan struct{}    // closed by Stop

	mu       sync.Mutex
	started  bool
	routerID netip.Addr
	asn      uint32
	peers    map[string]Peer // by name
	// failed are the peers GoBGP refused at the last Configure, with why.
	failed   map[string]string
	paths    map[netip.Prefix]advertised
	policy   *api.SetPoliciesRequest
	changed  chan struct{}
	onBFD    func(BFDChange)
	stopOnce sync.Once
	// watchStop ends the session watch of the running server: the watch
	// lives as long as the server, not as the call that started it.
	watchStop context.CancelFunc

	// PrefixLimitRestart replaces prefixLimitRestart when set (benchmarks,
	// tests); set it before the first Configure.
	PrefixLimitRestart time.Duration
	// GracefulShutdown is how long Shutdown, when the node is leaving, keeps
	// the routes advertised in graceful shutdown (RFC 8326) before it
	// withdraws them; 0 withdraws at once. Set it before the first Configure.
	GracefulShutdown time.Duration
	// restarting are the neighbours shut down for sending more than
	// maxPrefixes routes, whose restart is scheduled.
	restartMu  sync.Mutex
	restarting map[netip.Addr]bool
}

// New starts an idle speaker: no session until Configure names peers.
func New(log logr.Logger) *Speaker {
	s := &Speaker{
		log:       log,
		errors:    newPeerErrors(),
		bfdErrors: newPeerErrors(),
		done:      make(chan struct{}),
		peers:     map[string]Peer{},
		paths:     map[netip.Prefix]advertised{},
		changed:   make(chan struct{}, 1),

		restarting: map[netip.Addr]bool{},
	}
	s.server = s.newServer()
	s.links = newLinkAdvertisers(log.WithName("unnumbered"))
	s.bfdRun = newBFDSessions(log.WithName("bfd"), s.bfdDown, func(addr netip.Addr, why string) { s.bfdErrors.set(addr.String(), why) })
	go s.watchBFD()
	return s
}

// newServer starts a GoBGP server, idle until StartBgp.
func (s *Speaker) newServer() *server.BgpServer {
	srv := server.NewBgpServer(server.LoggerOption(slog.New(&logHandler{log: s.log, errors: s.errors}), nil))
	go srv.Serve()
	return srv
}

// Changed signals (coalesced) that a session changed state or the routes
// changed.
func (s *Speaker) Changed() <-chan struct{} { return s.changed }

func (s *Speaker) notify() {
	select {
	case s.changed <- struct{}{}:
	default:
	}
}

// globalASN is the ASN the server starts with: every peer may override it
// with its own myASN (GoBGP's per-peer local AS), so any will do; the
// smallest keeps it stable.
func globalASN(peers []Peer) uint32 {
	var asn uint32
	for _, p := range peers {
		if asn == 0 || p.MyASN < asn {
			asn = p.MyASN
		}
	}
	return asn
}

// Configure converges the sessions to cfg: peers added, changed ones updated
// in place, removed ones deleted (their routes go with the session). A new
// router ID or global ASN restarts the server, which only happens when the
// first peer arrives or the node's address changes.
func (s *Speaker) Configure(ctx context.Context, cfg Config) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(cfg.Peers) == 0 {
		return s.stopLocked(ctx)
	}
	if !cfg.RouterID.Is4() {
		return fmt.Errorf("router ID %s: want an IPv4 address (set the BGPPeer's routerID, or give the Node an IPv4 InternalIP)", cfg.RouterID)
	}
	asn := globalASN(cfg.Peers)
	if s.started && (s.routerID != cfg.RouterID || s.asn != asn) {
		if err := s.stopLocked(ctx); err != nil {
			return err
		}
	}
	if !s.started {
		if err := s.server.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{
			Asn: asn, RouterId: cfg.RouterID.String(),
			ListenPort: -1, // dial out only: routers listen, nodes never accept
		}}); err != nil {
			return fmt.Errorf("start BGP as AS %d, router ID %s: %w", asn, cfg.RouterID, err)
		}
		watchCtx, stop := context.WithCancel(context.Background())
		srv := s.server
		if err := s.server.WatchEvent(watchCtx, server.WatchEventMessageCallbacks{
			OnPeerUpdate: func(ev *apiutil.WatchEventMessage_PeerEvent, _ time.Time) {
				if ev.Peer.State.AdminState == api.PeerState_ADMIN_STATE_PFX_CT {
					s.restartAfterPrefixLimit(srv, ev.Peer.State.NeighborAddress)
				}
				s.notify()
			},
		}, server.WatchPeer()); err != nil {
			stop()
			return fmt.Errorf("watch BGP sessions: %w", err)
		}
		s.watchStop = stop
		s.started, s.routerID, s.asn = true, cfg.RouterID, asn
		// Import nothing from the first session on: the policies before any peer.
		if err := s.applyPolicyLocked(ctx); err != nil {
			return err
		}
		// The RIB starts empty: everything advertised before is added again.
		if err := s.readvertiseLocked(ctx); err != nil {
			return err
		}
	}
	// Each peer on its own: one GoBGP refuses (an address taken twice, a
	// setting it rejects), or an unnumbered one whose router is not found
	// yet, is left out and said on its session, the others converge.
	s.failed = map[string]string{}
	want := s.resolve(cfg.Peers)
	for name, p := range s.peers {
		if w, ok := want[name]; !ok || w.Address != p.Address {
			if err := s.server.DeletePeer(ctx, &api.DeletePeerRequest{Address: p.Address.String()}); err != nil {
				s.log.Error(err, "remove a BGP peer", "peer", name, "address", p.Address.String())
			}
			delete(s.peers, name)
			s.errors.forget(p.Address.String())
			s.bfdErrors.forget(p.Address.String())
		}
	}
	for _, name := range slices.Sorted(maps.Keys(want)) {
		if err := s.convergePeerLocked(ctx, name, want[name]); err != nil {
			s.failed[name] = err.Error()
		}
	}
	s.syncBFDLocked()
	return s.applyPolicyLocked(ctx)
}

// resolve maps peers by name, each unnumbered one with the address of the
// router on its link (those not found yet go to s.failed), and keeps the
// node advertising itself on exactly those links.
func (s *Speaker) resolve(peers []Peer) map[string]Peer {
	want := map[string]Peer{}
	links := map[string]bool{}
	for _, p := range peers {
		if p.Interface != "" {
			links[p.Interface] = true
			addr, which, err := routerOn(p.Interface, p.InterfaceRouter)
			if err != nil {
				s.failed[p.Name] = err.Error()
				continue
			}
			if prev, ok := s.peers[p.Name]; !ok || prev.Address != addr {
				s.log.Info("unnumbered BGP peer", "peer", p.Name, "router", addr.String(), "accepted as", which)
			}
			p.Address = addr
		}
		want[p.Name] = p
	}
	s.links.sync(links)
	return want
}

// Unconfigured reports whether a peer of the last Configure is not
// configured (GoBGP refused it, or an unnumbered peer's router was not found
// yet): the caller configures again soon, since no event says it changed.
func (s *Speaker) Unconfigured() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.failed) > 0
}

// convergePeerLocked adds, updates or re-adds one peer; on failure the peer
// is not configured (s.peers has it only while GoBGP does).
func (s *Speaker) convergePeerLocked(ctx context.Context, name string, p Peer) error {
	old, had := s.peers[name]
	switch {
	case !had:
		if err := s.server.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p)}); err != nil {
			return fmt.Errorf("add BGP peer %s (%s): %w", name, p.Address, err)
		}
	case reconnects(old, p):
		// GoBGP applies these only to a new session: this one restarts.
		if err := s.server.DeletePeer(ctx, &api.DeletePeerRequest{Address: p.Address.String()}); err != nil {
			return fmt.Errorf("remove BGP peer %s (%s) to change its session: %w", name, p.Address, err)
		}
		delete(s.peers, name)
		if err := s.server.AddPeer(ctx, &api.AddPeerRequest{Peer: apiPeer(p)}); err != nil {
			return fmt.Errorf("add BGP peer %s (%s): %w", name, p.Address, err)
		}
	case old != p:
		if _, err := s.server.UpdatePeer(ctx, &api.UpdatePeerRequest{Peer: apiPeer(p)}); err != nil {
			return fmt.Errorf("update BGP peer %s (%s): %w", name, p.Address, err)
		}
	}
	s.peers[name] = p
	return nil
}

// reconnects reports whether changing a peer from old to cur needs a new
// session: GoBGP updates timers and multi-hop in place, nothing else.
func reconnects(old, cur Peer) bool {
	return old.Password != cur.Password || old.Port != cur.Port || old.PeerASN != cur.PeerASN || old.MyASN != cur.MyASN ||
		old.GracefulRestart != cur.GracefulRestart || // a capability of the OPEN message
		old.Source != cur.Source // the connection's own address
}

// gracefulRestartTime is how long a router keeps a restarting node's routes.
const gracefulRestartTime = 120

// maxPrefixes bounds the routes a router may send on a session, per family.
// The node imports none (see policies), but GoBGP keeps every route received
// in the peer's adj-rib-in before the import policy rejects it: without a
// bound, a router that sends its full table (a missing outbound filter) costs
// every node the memory of that table. Past it, GoBGP closes the session
// (Cease, maximum number of prefixes reached) and drops what it received; the
// session's status says so, and it is restarted after prefixLimitRestart, so
// it comes back by itself once the router is fixed. Far more routes than a
// router needs to send a node that imports nothing, far fewer than a table.
const maxPrefixes = 10000

// prefixLimitRestart is how long a session closed for sending more than
// maxPrefixes routes stays down before the node connects again (FRR's and
// other routers' "maximum-prefix ... restart"): long enough that a router
// still sending its table costs the node little, short enough to recover
// soon after it is fixed.
const prefixLimitRestart = 30 * time.Second

// restartAfterPrefixLimit connects to addr again after prefixLimitRestart,
// once per shutdown, if srv is still the running server and still peers
// with addr. GoBGP leaves such a session down for good.
func (s *Speaker) restartAfterPrefixLimit(srv *server.BgpServer, addr netip.Addr) {
	s.restartMu.Lock()
	defer s.restartMu.Unlock()
	if s.restarting[addr] {
		return
	}
	s.restarting[addr] = true
	time.AfterFunc(s.restartAfter(), func() {
		s.restartMu.Lock()
		delete(s.restarting, addr)
		s.restartMu.Unlock()
		s.mu.Lock()
		defer s.mu.Unlock()
		if s.server != srv || !s.started || !s.peersWithLocked(addr) {
			return
		}
		if err := srv.EnablePeer(context.Background(), &api.EnablePeerRequest{Address: addr.String()}); err != nil {
			s.log.Error(err, "restart a session closed for too many routes", "address", addr)
		}
	})
}

// restartAfter is how long a session closed over the prefix limit stays down.
func (s *Speaker) restartAfter() time.Duration {
	if s.PrefixLimitRestart > 0 {
		return s.PrefixLimitRestart
	}
	return prefixLimitRestart
}

// peersWithLocked reports whether a configured peer has address addr.
func (s *Speaker) peersWithLocked(addr netip.Addr) bool {
	for _, p := range s.peers {
		if p.Address == addr {
			return true
		}
	}
	return false
}

// apiPeer is GoBGP's description of p.
func apiPeer(p Peer) *api.Peer {
	fam := &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}
	if p.Address.Is6() {
		fam.Afi = api.Family_AFI_IP6
	}
	fams := []*api.Family{fam}
	if p.Interface != "" {
		// Both families over the one IPv6 session; GoBGP offers the extended
		// next hop capability for IPv4 (RFC 8950) and gives IPv4 routes the
		// session's link-local address as their next hop.
		fams = []*api.Family{{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, {Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}}
	}
	out := &api.Peer{
		Conf: &api.PeerConf{NeighborAddress: p.Address.String(), PeerAsn: p.PeerASN, LocalAsn: p.MyASN, AuthPassword: p.Password},
		Timers: &api.Timers{Config: &api.TimersConfig{
			HoldTime:          uint64(p.Hold / time.Second),
			KeepaliveInterval: uint64(p.Keepalive / time.Second),
			// Retry a refused or lost connection every second or two, so a
			// router that comes back gets its routes at once.
			ConnectRetry:           1,
			IdleHoldTimeAfterReset: 1,
		}},
		Transport: &api.Transport{RemotePort: uint32(p.Port)},
		// No Bfd: the speaker runs BFD itself (bfdSessions).
	}
	for _, f := range fams {
		out.AfiSafis = append(out.AfiSafis, &api.AfiSafi{Config: &api.AfiSafiConfig{Family: f, Enabled: true},
			PrefixLimits: &api.PrefixLimit{Family: f, MaxPrefixes: maxPrefixes, ShutdownThresholdPct: 80}})
	}
	if p.Source.IsValid() {
		out.Transport.LocalAddress = p.Source.String()
	}
	if p.MultiHop {
		out.EbgpMultihop = &api.EbgpMultihop{Enabled: true, MultihopTtl: 255}
	}
	if p.GracefulRestart {
		// LocalRestarting sets the Restart State and Forwarding State bits
		// of the first session: a router still holding this node's stale
		// routes keeps them until this agent has sent its own (the rules
		// forwarded all along).
		out.GracefulRestart = &api.GracefulRestart{Enabled: true, RestartTime: gracefulRestartTime, LocalRestarting: true}
		for _, af := range out.AfiSafis {
			af.MpGracefulRestart = &api.MpGracefulRestart{Config: &api.MpGracefulRestartConfig{Enabled: true}}
		}
	}
	return out
}

// WithdrawAll withdraws every route and waits until the peers were sent the
// withdrawals (at most timeout): a node that is leaving is out of the
// routers' ECMP groups before it stops forwarding.
func (s *Speaker) WithdrawAll(ctx context.Context, timeout time.Duration) error {
	if err := s.Advertise(ctx, nil); err != nil {
		return err
	}
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		sent := 0
		for _, sess := range s.Sessions(ctx) {
			sent += sess.PrefixesSent
		}
		if sent == 0 {
			return nil
		}
		time.Sleep(20 * time.Millisecond)
	}
	return fmt.Errorf("routes still advertised after %s", timeout)
}

// Shutdown ends the speaker as the agent stops. Leaving (the node goes away,
// or any stop of a node whose peers lack graceful restart), it first
// advertises every route in graceful shutdown for GracefulShutdown (see
// shutDownGracefully), then withdraws every route, waits until the peers were
// sent the withdrawals (at most a second), and closes every session: the
// routers move traffic off the node while its rules still forward.
// Restarting, the sessions of peers with graceful restart are left to end
// with the process, without a notification: those routers
// keep the node's routes, marked stale, until the new agent has sent them
// again; every other session is closed (its router drops the routes at once).
func (s *Speaker) Shutdown(ctx context.Context, restarting bool) {
	if !restarting {
		s.shutDownGracefully(ctx)
		if err := s.WithdrawAll(ctx, time.Second); err != nil {
			s.log.Error(err, "withdraw the routes before stopping")
		}
		s.Stop(ctx)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for name, p := range s.peers {
		if p.GracefulRestart {
			continue
		}
		if err := s.server.DeletePeer(ctx, &api.DeletePeerRequest{Address: p.Address.String()}); err != nil {
			s.log.Error(err, "close the session before stopping", "peer", name)
		}
	}
}

// shutDownGracefully advertises every route again in graceful shutdown (the
// GRACEFUL_SHUTDOWN community, LOCAL_PREF 0 to iBGP peers) and waits until
// each has been for GracefulShutdown (or ctx ends): the routers prefer the
// other nodes' paths and move the traffic while this node still forwards,
// before the withdrawal and the closed sessions. A route already in graceful
// shutdown (the announcer marked it when the node was cordoned) counts from
// then. Nothing is waited for when no router was sent a route.
func (s *Speaker) shutDownGracefully(ctx context.Context) {
	if s.GracefulShutdown <= 0 {
		return
	}
	sent := 0
	for _, sess := range s.Sessions(ctx) {
		sent += sess.PrefixesSent
	}
	if sent == 0 {
		return
	}
	s.mu.Lock()
	routes := make([]Route, 0, len(s.paths))
	for _, a := range s.paths {
		r := a.route
		r.GracefulShutdown = true
		routes = append(routes, r)
	}
	s.mu.Unlock()
	if err := s.Advertise(ctx, routes); err != nil {
		s.log.Error(err, "advertise the routes in graceful shutdown before withdrawing them")
		return
	}
	s.mu.Lock()
	var until time.Time
	for _, a := range s.paths {
		if end := a.marked.Add(s.GracefulShutdown); end.After(until) {
			until = end
		}
	}
	s.mu.Unlock()
	s.log.Info("routes in graceful shutdown before their withdrawal", "routes", len(routes), "until", until)
	t := time.NewTimer(time.Until(until))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// Stop closes every session (a Cease notification to each router) and the server.
func (s *Speaker) Stop(ctx context.Context) {
	s.stopOnce.Do(func() {
		s.mu.Lock()
		defer s.mu.Unlock()
		if err := s.stopLocked(ctx); err != nil {
			s.log.Error(err, "stop BGP")
		}
		close(s.done)
		s.server.Stop()
	})
}

// stopLocked closes every session and the server. GoBGP v4 ends a server
// for good with StopBgp (unlike v3, it cannot start again), so a fresh one
// takes its place, idle until the next StartBgp.
func (s *Speaker) stopLocked(context.Context) error {
	if !s.started {
		return nil
	}
	s.watchStop()
	s.server.Stop() // StopBgp (a Cease to each router), then its BFD; errors are logged
	s.server = s.newServer()
	s.started = false
	s.peers = map[string]Peer{}
	s.syncBFDLocked()
	s.links.sync(nil)
	s.failed = nil
	s.policy = nil
	for p, a := range s.paths {
		a.uuid = uuid.Nil // the RIB is gone with the server
		s.paths[p] = a
	}
	return nil
}

// peerNames are the names of the peers configured now, sorted.
func (s *Speaker) peerNamesLocked() []string {
	var out []string
	for n := range s.peers {
		out = append(out, n)
	}
	slices.Sort(out)
	return out
}
