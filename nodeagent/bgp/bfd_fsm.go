package bgp

import (
	"time"

	"github.com/osrg/gobgp/v4/pkg/packet/bfd"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// bfdFSM is one BFD session's state machine (RFC 5880 section 6.8.6), with
// no socket and no clock of its own: the runtime (bfdSession) feeds it the
// packets received and the time, and does what it answers.
//
// It follows the router's current session: a router may replace its BFD
// session with a node while the path stays up (FRR creates the session of a
// dynamic neighbour, 'bgp listen range', anew each time its BGP session
// comes up, and replaces a static neighbour's once it learns its local
// address). The new session announces itself with a Down packet that has a
// new My Discriminator and no Your Discriminator, from the router's address
// (RFC 5880 selects such packets by address). That is no path failure, and
// no word about this session (which the new one never knew): this session
// starts over with the new one, quietly, and comes up with it in a round
// trip, where holding on to the old discriminator would wait for packets
// that never come, declare the path down and reset a BGP session that was
// fine.
type bfdFSM struct {
	cfg   BFD
	local uint32 // My Discriminator
	state bfd.StateType
	diag  bfd.DiagnosticType

	heard      bool   // a valid packet came since the session started
	remote     uint32 // the router's My Discriminator; 0 unknown
	remoteMult uint8
	remoteTx   time.Duration // the router's Desired Min TX Interval
	remoteRx   time.Duration // the router's Required Min RX Interval
	lastRx     time.Time
	received   uint64 // valid packets
}

func newBFDFSM(cfg BFD, local uint32) *bfdFSM {
	return &bfdFSM{cfg: cfg, local: local, state: bfd.StateDown}
}

// bfdRx is what one received packet did.
type bfdRx struct {
	accepted bool // a valid packet of this session
	changed  bool // the state changed: tell the router at once
	final    bool // the router polled: answer with Final at once
	rebound  bool // the router's session was a new one: this one started over with it
	// down is why the path is down, set when the router signalled Down on
	// an Up session: the BGP session is reset.
	down string
	// adminDown: the router took the session administratively down.
	adminDown bool
}

// Reasons the path went down, for the status.
const (
	bfdExpired   = "BFD declared the path down (no packet from the router within the detection time): the session was reset"
	bfdSignalled = "the router signalled BFD down: the session was reset"
	bfdAdminDown = "the router took BFD administratively down (AdminDown): the session runs without BFD, on the hold timer"
)

// receive runs one packet from the router's address through the session.
func (f *bfdFSM) receive(h *bfd.BFDHeader, now time.Time) (r bfdRx) {
	// Section 6.8.6: the checks that discard a packet.
	if h.Version != 1 || h.DetectTimeMultiplier == 0 || h.MyDiscriminator == 0 {
		return r
	}
	if h.YourDiscriminator != 0 && h.YourDiscriminator != f.local {
		return r
	}
	if h.YourDiscriminator == 0 && h.State != bfd.StateDown && h.State != bfd.StateAdminDown {
		return r
	}
	before := f.state
	if f.remote != 0 && h.MyDiscriminator != f.remote {
		if h.YourDiscriminator != 0 {
			// A session of the router's that knows this one but is not
			// the one this one follows: one it replaced, still sending.
			return r
		}
		r.rebound = true
		f.state, f.diag = bfd.StateDown, bfd.DiagnosticNoDiagnostic
	}
	r.accepted = true
	f.heard = true
	f.remote = h.MyDiscriminator
	f.remoteMult = h.DetectTimeMultiplier
	f.remoteTx = time.Duration(h.DesiredMinTxInterval) * time.Microsecond
	f.remoteRx = time.Duration(h.RequiredMinRxInterval) * time.Microsecond
	f.lastRx = now
	f.received++
	switch h.State {
	case bfd.StateAdminDown:
		// RFC 5882 section 3.2: the router stopped BFD on purpose, which
		// says nothing of the path: no reset.
		if f.state != bfd.StateDown {
			f.state, f.diag = bfd.StateDown, bfd.DiagnosticNeighborSignaledSessionDown
			r.adminDown = true
		}
	case bfd.StateDown:
		switch f.state {
		case bfd.StateDown:
			f.state = bfd.StateInit
		case bfd.StateUp:
			f.state, f.diag = bfd.StateDown, bfd.DiagnosticNeighborSignaledSessionDown
			r.down = bfdSignalled
		}
	case bfd.StateInit:
		if f.state != bfd.StateUp {
			f.state = bfd.StateUp
		}
	case bfd.StateUp:
		if f.state == bfd.StateInit {
			f.state = bfd.StateUp
		}
	}
	r.changed = f.state != before || r.rebound
	r.final = h.Poll
	return r
}

// detectTime is how long the session may go without a packet before the
// path is down (section 6.8.4): the router's multiplier times the slower
// of the rate this node asks for and the rate the router sends at.
func (f *bfdFSM) detectTime() time.Duration {
	return time.Duration(f.remoteMult) * max(f.cfg.Receive, f.remoteTx)
}

// expire checks the detection time at now: past it, an Up session
// declares the path down and returns why (the BGP session is reset); an
// Init one, which protected nothing yet, just goes back to Down.
func (f *bfdFSM) expire(now time.Time) string {
	if f.state == bfd.StateDown || now.Sub(f.lastRx) < f.detectTime() {
		return ""
	}
	up := f.state == bfd.StateUp
	f.state, f.diag, f.remote = bfd.StateDown, bfd.DiagnosticControlDetectionTimeExpired, 0
	if up {
		return bfdExpired
	}
	return ""
}

// txInterval is the time between two periodic packets (section 6.8.7, before
// jitter): the slower of what this node wants to send at and what the router
// wants to receive at; 0 when the router wants none. Until the router is
// heard from, this node's own rate.
func (f *bfdFSM) txInterval() time.Duration {
	if !f.heard {
		return f.cfg.Transmit
	}
	if f.remoteRx == 0 {
		return 0
	}
	return max(f.cfg.Transmit, f.remoteRx)
}

// packet is the control packet this session sends now.
func (f *bfdFSM) packet(final bool) *bfd.BFDHeader {
	return &bfd.BFDHeader{
		Version:               1,
		Diagnostic:            f.diag,
		State:                 f.state,
		Final:                 final,
		DetectTimeMultiplier:  f.cfg.Multiplier,
		MyDiscriminator:       f.local,
		YourDiscriminator:     f.remote,
		DesiredMinTxInterval:  uint32(f.cfg.Transmit.Microseconds()),
		RequiredMinRxInterval: uint32(f.cfg.Receive.Microseconds()),
	}
}

// stateName is the state as the status says it.
func (f *bfdFSM) stateName() string {
	switch f.state {
	case bfd.StateUp:
		return paasv1.BFDUp
	case bfd.StateInit:
		return paasv1.BFDInit
	case bfd.StateAdminDown:
		return paasv1.BFDAdminDown
	}
	return paasv1.BFDDown
}
