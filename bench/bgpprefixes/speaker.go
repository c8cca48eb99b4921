package main

import (
	"context"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"time"

	"github.com/go-logr/logr"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/server"

	"github.com/paas-org/vip-allocator-operator/internal/procmem"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
)

// settle is how long a speaker runs on after it has every route (or closed the session)
// before it is measured: GoBGP drops a closed session's routes as the session goes down.
const settle = 2 * time.Second

// restartAfter replaces the agent's delay before it connects again after closing a session
// over the limit (30 s): longer than settle, so the measurement sees the session closed.
const restartAfter = 5 * time.Second

// memProfile is where a speaker writes its heap profile (-memprofile), its mode appended.
var memProfile string

// runSpeaker peers with the router as the node, in mode, until the router's n routes are in
// its adj-rib-in (bare GoBGP) or it closed the session over its limit (the agent's speaker),
// and reports its memory growth over the idle process.
func runSpeaker(mode string, n int, timeout time.Duration) (result, error) {
	r := result{Mode: mode, Routes: -1}
	r.BeforeRSS, r.BeforeHeap = memory()
	ctx := context.Background()
	start := time.Now()
	var done func() (bool, error)
	var again func() error // the agent's speaker: it connects again, and closes again
	switch mode {
	case modeAgent:
		s := bgp.New(logr.Discard())
		s.PrefixLimitRestart = restartAfter
		defer s.Stop(ctx)
		if err := s.Configure(ctx, bgp.Config{RouterID: netip.MustParseAddr("192.0.2.2"), Peers: []bgp.Peer{{Name: "router",
			Address: netip.MustParseAddr(routerAddr), Port: 179, PeerASN: routerASN, MyASN: nodeASN, Hold: 3 * time.Second, Keepalive: time.Second}}}); err != nil {
			return r, fmt.Errorf("configure the agent's speaker: %w", err)
		}
		done = func() (bool, error) {
			for _, sess := range s.Sessions(ctx) {
				if sess.OverPrefixLimit {
					r.Limited = true
					return true, nil
				}
				r.SessionError = sess.Message
			}
			return false, nil
		}
		again = func() error {
			reconnected := false
			for begin := time.Now(); time.Since(begin) < timeout; time.Sleep(100 * time.Millisecond) {
				for _, sess := range s.Sessions(ctx) {
					switch {
					case !sess.OverPrefixLimit:
						reconnected = true
					case reconnected:
						r.Restarted = time.Since(start).Seconds()
						return nil
					}
				}
			}
			return fmt.Errorf("the session closed over the limit did not come back and close again within %s", timeout)
		}
	case modeAcceptAll, modeRejectAll:
		srv, err := bareSpeaker(ctx, mode == modeRejectAll)
		if err != nil {
			return r, err
		}
		defer srv.Stop()
		done = func() (bool, error) {
			r.Routes = 0
			err := srv.ListPeer(ctx, &api.ListPeerRequest{}, func(p *api.Peer) {
				for _, af := range p.GetAfiSafis() {
					r.Routes += int(af.GetState().GetReceived())
				}
			})
			return r.Routes >= n, err
		}
	default:
		return r, fmt.Errorf("unknown mode %q", mode)
	}
	for {
		ok, err := done()
		if err != nil {
			return r, err
		}
		if ok {
			break
		}
		if time.Since(start) > timeout {
			return r, fmt.Errorf("%s: not done after %s (routes %d; session: %s)", mode, timeout, r.Routes, r.SessionError)
		}
		time.Sleep(200 * time.Millisecond)
	}
	r.Seconds = time.Since(start).Seconds()
	time.Sleep(settle)
	_, r.PeakRSS = procmem.Read("self")
	r.RSS, r.Heap = memory()
	if memProfile != "" {
		f, err := os.Create(memProfile + "." + mode)
		if err != nil {
			return r, err
		}
		defer f.Close()
		if err := pprof.WriteHeapProfile(f); err != nil {
			return r, err
		}
	}
	if again != nil {
		if err := again(); err != nil {
			return r, err
		}
	}
	return r, nil
}

// bareSpeaker is a GoBGP server peering with the router as the node: with GoBGP's default
// policies (accept everything), or with a global import policy that rejects everything.
func bareSpeaker(ctx context.Context, rejectAll bool) (*server.BgpServer, error) {
	srv := server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), nil))
	go srv.Serve()
	if err := srv.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: nodeASN, RouterId: "192.0.2.2", ListenPort: -1}}); err != nil {
		return nil, fmt.Errorf("start BGP: %w", err)
	}
	if rejectAll {
		if err := srv.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: &api.PolicyAssignment{Name: "global",
			Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT, DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT}}); err != nil {
			return nil, fmt.Errorf("reject every route: %w", err)
		}
	}
	v6 := &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	if err := srv.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: routerAddr, PeerAsn: routerASN},
		Transport: &api.Transport{RemotePort: 179},
		Timers:    &api.Timers{Config: &api.TimersConfig{HoldTime: 3, KeepaliveInterval: 1, ConnectRetry: 1}},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: v6, Enabled: true}}},
	}}); err != nil {
		return nil, fmt.Errorf("add the router: %w", err)
	}
	return srv, nil
}

// memory is the process's RSS and live heap after a full collection, in MiB.
func memory() (rss, heap float64) {
	runtime.GC()
	debug.FreeOSMemory()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	rss, _ = procmem.Read("self")
	return rss, float64(m.HeapAlloc) / (1 << 20)
}
