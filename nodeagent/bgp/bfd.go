package bgp

import (
	"context"
	"fmt"
	"sync"
	"time"

	api "github.com/osrg/gobgp/v4/api"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// BFD are the timers of a peer's BFD session (RFC 5880, single hop,
// asynchronous mode: GoBGP has no echo mode). The zero value is no BFD.
//
// GoBGP runs BFD itself: a UDP listener on port 3784 once a peer has BFD, a
// session per such peer, and a hard reset of the BGP session the moment BFD
// declares the path down (no packet within the detection time, or the
// router signalling Down). The BGP session then reconnects on its own
// timers (every second), so it is back as soon as the path is; a router
// that never answers BFD leaves the plain session alone (BFD only goes down
// from Init or Up).
type BFD struct {
	Receive    time.Duration // the slowest rate this node wants packets at
	Transmit   time.Duration // the rate this node wants to send at
	Multiplier uint8         // packets lost in a row before the path is down
}

// Enabled reports whether the peer runs BFD.
func (b BFD) Enabled() bool { return b.Multiplier > 0 }

// apiBFD is GoBGP's form of b (intervals in microseconds).
func apiBFD(b BFD) *api.BfdPeerConfig {
	if !b.Enabled() {
		return nil
	}
	return &api.BfdPeerConfig{
		Enabled:                  true,
		DesiredMinimumTxInterval: uint32(b.Transmit.Microseconds()),
		RequiredMinimumReceive:   uint32(b.Receive.Microseconds()),
		DetectionMultiplier:      uint32(b.Multiplier),
	}
}

var bfdStateNames = map[api.BfdSessionState]string{
	api.BfdSessionState_BFD_SESSION_STATE_UNSPECIFIED: paasv1.BFDDown,
	api.BfdSessionState_BFD_SESSION_STATE_DOWN:        paasv1.BFDDown,
	api.BfdSessionState_BFD_SESSION_STATE_ADMIN_DOWN:  paasv1.BFDAdminDown,
	api.BfdSessionState_BFD_SESSION_STATE_INIT:        paasv1.BFDInit,
	api.BfdSessionState_BFD_SESSION_STATE_UP:          paasv1.BFDUp,
}

// bfdSession is what GoBGP tells of one BFD session.
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
// turn GoBGP's state list (it has no BFD events) into changes.
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
// said so (lastDown: GoBGP's last word on it).
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

// bfdReason turns one of GoBGP's BFD log messages into a sentence for the
// status, or "" for messages that say nothing about a failure.
func bfdReason(msg string) string {
	switch msg {
	case "Expired":
		return "BFD declared the path down (no packet from the router within the detection time): the session was reset"
	case "Remote peer signaled BFD down":
		return "the router signalled BFD down: the session was reset"
	}
	return ""
}

// bfdPoll is how often GoBGP's BFD states are read: a state change reaches
// the status and the metrics within it.
const bfdPoll = 100 * time.Millisecond

// OnBFDChange has fn called (from the speaker's own goroutine) whenever a
// peer's BFD session changes state.
func (s *Speaker) OnBFDChange(fn func(BFDChange)) {
	s.mu.Lock()
	s.onBFD = fn
	s.mu.Unlock()
}

// watchBFD reads GoBGP's BFD states until the speaker stops, and reports
// every change (OnBFDChange, Changed).
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
		onBFD, srv := s.onBFD, s.server
		s.mu.Unlock()
		now := map[string]bfdSession{}
		if len(names) > 0 {
			srv.ListBfdPeer(context.Background(), func(addr string, st *api.BfdPeerState) {
				if _, ok := names[addr]; ok {
					now[addr] = bfdSession{state: bfdStateNames[st.GetSessionState()], received: st.GetBfdAsync().GetReceivedPackets()}
				}
			})
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
