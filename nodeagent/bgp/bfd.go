package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// BFD are the timers of a peer's BFD session (RFC 5880, single hop, RFC
// 5881; asynchronous mode, no echo). The zero value is no BFD.
//
// The speaker runs BFD itself, beside GoBGP (bfdSessions, bfdFSM): a UDP
// listener on port 3784 while a peer has BFD, a session per such peer, and
// a hard reset of the BGP session the moment BFD declares an Up path down
// (no packet within the detection time, or the router signalling Down). The
// BGP session then reconnects on its own timers (every second), so it is
// back as soon as the path is. A router that never answers BFD leaves the
// plain session alone, as does one that takes BFD administratively down, or
// replaces its BFD session (see bfdFSM).
type BFD struct {
	Receive    time.Duration // the slowest rate this node wants packets at
	Transmit   time.Duration // the rate this node wants to send at
	Multiplier uint8         // packets lost in a row before the path is down
	// Source is the address the packets leave from: the BGP session's own
	// (Peer.Source), which the router matches the BFD session by; the zero
	// value: the kernel's choice. Set by the speaker, not by callers.
	Source netip.Addr
}

// Enabled reports whether the peer runs BFD.
func (b BFD) Enabled() bool { return b.Multiplier > 0 }

// bfdSession is what the status is told of one BFD session.
type bfdSession struct {
	state    string
	received uint64    // valid packets from the router since the session was created
	lastRx   time.Time // when received last grew (set by bfdTracker)
}

// bfdSilent is how long a router may send no BFD packet on an established
// session before the status says it does not run BFD (any more).
const bfdSilent = 5 * time.Second

// BFDChange is one BFD session entering a state.
type BFDChange struct {
	Peer  string // the BGPPeer's name
	State string
}

// bfdTracker remembers the BFD states last seen, by neighbour address, to
// turn the sessions' states, read every bfdPoll, into changes.
type bfdTracker struct {
	mu   sync.Mutex
	last map[string]bfdSession
}

// observe records sessions (address → session) seen at now and returns
// the sessions whose state changed, by address; a session gone is
// forgotten, a new one starting Down has not changed.
func (t *bfdTracker) observe(sessions map[string]bfdSession, now time.Time) map[string]string {
	t.mu.Lock()
	defer t.mu.Unlock()
	changed := map[string]string{}
	for addr, s := range sessions {
		old, ok := t.last[addr]
		if (ok && old.state != s.state) || (!ok && s.state != paasv1.BFDDown) {
			changed[addr] = s.state
		}
		s.lastRx = old.lastRx
		if s.received > old.received || (!ok && s.received > 0) {
			s.lastRx = now
		}
		sessions[addr] = s
	}
	t.last = sessions
	return changed
}

func (t *bfdTracker) session(addr string) (bfdSession, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.last[addr]
	return s, ok
}

// bfdMessage says why a peer's BFD session is not up, for the status: a
// router that sends no packet (never, or for bfdSilent) while the BGP
// session is established does not run BFD for this node (the session runs
// without it, on the hold timer); otherwise the path failed or the router
// said so (lastDown: the session's last word on it).
func bfdMessage(s bfdSession, known, established bool, lastDown string, addr string, now time.Time) string {
	silent := !known || s.received == 0 || now.Sub(s.lastRx) > bfdSilent
	switch {
	case known && s.state == paasv1.BFDUp:
		return ""
	case established && silent:
		return fmt.Sprintf("the router sends no BFD packets: it does not run BFD for this node (FRR: bfdd running and 'neighbor <this node> bfd'), or UDP 3784 from %s is filtered; the session runs without BFD, on the hold timer", addr)
	case known && s.received > 0 && lastDown != "":
		return lastDown
	case known && s.received > 0:
		return fmt.Sprintf("BFD is %s: packets from the router come, the session is not up yet", s.state)
	default:
		return "no BFD packets from the router yet"
	}
}

// bfdPoll is how often the BFD states are read: a state change reaches the
// status and the metrics within it.
const bfdPoll = 100 * time.Millisecond

// OnBFDChange has fn called (from the speaker's own goroutine) whenever a
// peer's BFD session changes state.
func (s *Speaker) OnBFDChange(fn func(BFDChange)) {
	s.mu.Lock()
	s.onBFD = fn
	s.mu.Unlock()
}

// watchBFD reads the BFD states until the speaker stops, and reports every
// change (OnBFDChange, Changed).
func (s *Speaker) watchBFD() {
	tick := time.NewTicker(bfdPoll)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
		}
		s.mu.Lock()
		names := map[string]string{} // address → name, of the peers with BFD
		for name, p := range s.peers {
			if p.BFD.Enabled() {
				names[p.Address.String()] = name
			}
		}
		onBFD := s.onBFD
		s.mu.Unlock()
		now := map[string]bfdSession{}
		for addr, st := range s.bfdRun.states() {
			if _, ok := names[addr]; ok {
				now[addr] = st
			}
		}
		changed := s.bfd.observe(now, time.Now())
		for addr, state := range changed {
			if state == paasv1.BFDUp {
				s.bfdErrors.forget(addr)
			}
			if onBFD != nil {
				onBFD(BFDChange{Peer: names[addr], State: state})
			}
		}
		if len(changed) > 0 {
			s.notify()
		}
	}
}

// syncBFDLocked runs a BFD session for each configured peer with BFD, and
// none for the others.
func (s *Speaker) syncBFDLocked() {
	want := map[netip.Addr]BFD{}
	for _, p := range s.peers {
		if p.BFD.Enabled() && p.Interface == "" { // the API refuses bfd on unnumbered sessions
			b := p.BFD
			b.Source = p.Source
			want[p.Address] = b
		}
	}
	s.bfdRun.sync(want)
}

// bfdDown resets the BGP session with addr, if it is established: BFD
// declared the path down. A session that is not established is left alone:
// GoBGP queues a reset's notification until the session is next
// established, and would reset that one, on a path that is fine again.
func (s *Speaker) bfdDown(addr netip.Addr, why string) {
	s.bfdErrors.set(addr.String(), why)
	s.mu.Lock()
	srv, ok := s.server, s.started && s.peersWithLocked(addr)
	s.mu.Unlock()
	if !ok {
		return
	}
	ctx := context.Background()
	established := false
	if err := srv.ListPeer(ctx, &api.ListPeerRequest{Address: addr.String()}, func(p *api.Peer) {
		established = p.GetState().GetSessionState() == api.PeerState_SESSION_STATE_ESTABLISHED
	}); err != nil || !established {
		return
	}
	s.log.Info("BFD is down: resetting the BGP session", "address", addr, "reason", why)
	if err := srv.ResetPeer(ctx, &api.ResetPeerRequest{Address: addr.String(), Communication: "BFD is down"}); err != nil {
		s.log.Error(err, "reset the BGP session after BFD went down", "address", addr)
	}
}
