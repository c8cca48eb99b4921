package bgp

import (
	"errors"
	"math/rand/v2"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/osrg/gobgp/v4/pkg/packet/bfd"
	"golang.org/x/net/ipv4"
	"golang.org/x/net/ipv6"
)

// bfdPort is where single-hop BFD control packets go (RFC 5881).
const bfdPort = 3784

// bfdSessions runs the node's BFD sessions, one per peer with BFD, beside
// GoBGP (whose peers have no BFD of their own): a UDP listener on port 3784
// per address family while a session needs it, and per session a goroutine
// and a socket from a port in 49152-65535. A session that declares the path
// down calls down, which resets the peer's BGP session.
type bfdSessions struct {
	log  logr.Logger
	down func(addr netip.Addr, why string)
	note func(addr netip.Addr, why string) // a reason for the status, without a reset

	mu        sync.Mutex
	sessions  map[netip.Addr]*bfdPeer
	listeners map[string]net.PacketConn // by network: udp4, udp6
	retry     *time.Timer               // a listener that failed is tried again
}

func newBFDSessions(log logr.Logger, down, note func(netip.Addr, string)) *bfdSessions {
	return &bfdSessions{log: log, down: down, note: note, sessions: map[netip.Addr]*bfdPeer{}, listeners: map[string]net.PacketConn{}}
}

// sync runs exactly the sessions of want (address → timers): a session
// whose timers changed starts over, with a new discriminator.
func (b *bfdSessions) sync(want map[netip.Addr]BFD) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for addr, s := range b.sessions {
		if cfg, ok := want[addr]; !ok || cfg != s.cfg {
			s.close()
			delete(b.sessions, addr)
		}
	}
	for addr, cfg := range want {
		if _, ok := b.sessions[addr]; !ok {
			s := newBFDPeer(addr, cfg)
			b.sessions[addr] = s
			go s.run(b.log.WithValues("peer", addr.String()), func(why string) { b.down(addr, why) }, func(why string) { b.note(addr, why) })
		}
	}
	b.listenLocked()
}

// listenLocked opens the listeners the sessions need and closes the others;
// one that cannot open is tried again every second.
func (b *bfdSessions) listenLocked() {
	need := map[string]bool{}
	for addr := range b.sessions {
		need[network(addr)] = true
	}
	for nw, c := range b.listeners {
		if !need[nw] {
			_ = c.Close()
			delete(b.listeners, nw)
		}
	}
	failed := false
	for nw := range need {
		if b.listeners[nw] != nil {
			continue
		}
		c, err := listenBFD(nw, b.dispatch)
		if err != nil {
			b.log.Error(err, "listen for BFD packets: BFD cannot come up until it can", "network", nw, "port", bfdPort)
			failed = true
			continue
		}
		b.listeners[nw] = c
	}
	if failed && b.retry == nil {
		b.retry = time.AfterFunc(time.Second, func() {
			b.mu.Lock()
			defer b.mu.Unlock()
			b.retry = nil
			b.listenLocked()
		})
	}
}

// dispatch hands a packet from addr to its session, if any.
func (b *bfdSessions) dispatch(addr netip.Addr, h *bfd.BFDHeader) {
	b.mu.Lock()
	s := b.sessions[addr]
	b.mu.Unlock()
	if s != nil {
		s.receive(h)
	}
}

// states are the sessions' states and packet counts, by address.
func (b *bfdSessions) states() map[string]bfdSession {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make(map[string]bfdSession, len(b.sessions))
	for addr, s := range b.sessions {
		s.mu.Lock()
		out[addr.String()] = bfdSession{state: s.fsm.stateName(), received: s.fsm.received}
		s.mu.Unlock()
	}
	return out
}

func network(addr netip.Addr) string {
	if addr.Unmap().Is4() {
		return "udp4"
	}
	return "udp6"
}

// listenBFD listens on port 3784 of network (udp4, udp6) and hands each
// valid packet to deliver until the listener is closed. Packets that were
// routed (TTL or hop limit below 255) are dropped, as RFC 5881 requires: a
// single-hop session only takes packets from the link.
func listenBFD(nw string, deliver func(netip.Addr, *bfd.BFDHeader)) (net.PacketConn, error) {
	c, err := net.ListenPacket(nw, ":3784")
	if err != nil {
		return nil, err
	}
	var read func([]byte) (int, int, net.Addr, error) // bytes, TTL (-1 unknown), source
	if nw == "udp4" {
		p := ipv4.NewPacketConn(c)
		if err := p.SetControlMessage(ipv4.FlagTTL, true); err != nil {
			_ = c.Close()
			return nil, err
		}
		read = func(buf []byte) (int, int, net.Addr, error) {
			n, cm, src, err := p.ReadFrom(buf)
			if cm == nil {
				return n, -1, src, err
			}
			return n, cm.TTL, src, err
		}
	} else {
		p := ipv6.NewPacketConn(c)
		if err := p.SetControlMessage(ipv6.FlagHopLimit, true); err != nil {
			_ = c.Close()
			return nil, err
		}
		read = func(buf []byte) (int, int, net.Addr, error) {
			n, cm, src, err := p.ReadFrom(buf)
			if cm == nil {
				return n, -1, src, err
			}
			return n, cm.HopLimit, src, err
		}
	}
	go func() {
		buf := make([]byte, 512)
		for {
			n, ttl, src, err := read(buf)
			if errors.Is(err, net.ErrClosed) {
				return
			}
			u, ok := src.(*net.UDPAddr)
			if err != nil || !ok || ttl != 255 {
				continue
			}
			var h bfd.BFDHeader
			if h.UnmarshalBinary(buf[:n]) != nil {
				continue
			}
			deliver(u.AddrPort().Addr().Unmap(), &h)
		}
	}()
	return c, nil
}

// bfdPeer is one running session: its state machine, driven by the packets
// the listener hands it and by its timers, in its own goroutine.
type bfdPeer struct {
	addr netip.Addr
	cfg  BFD
	rx   chan *bfd.BFDHeader
	stop chan struct{}

	mu  sync.Mutex // guards fsm between the goroutine and states
	fsm *bfdFSM
}

func newBFDPeer(addr netip.Addr, cfg BFD) *bfdPeer {
	var local uint32
	for local == 0 {
		local = rand.Uint32() //nolint:gosec // math/rand/v2's top-level functions draw from the runtime's ChaCha8, seeded by the OS: unpredictable enough for a discriminator on a TTL-255 link
	}
	return &bfdPeer{addr: addr, cfg: cfg, rx: make(chan *bfd.BFDHeader, 8), stop: make(chan struct{}), fsm: newBFDFSM(cfg, local)}
}

// receive queues a packet; one arriving while the queue is full is lost,
// as on the wire.
func (s *bfdPeer) receive(h *bfd.BFDHeader) {
	select {
	case s.rx <- h:
	default:
	}
}

// close ends the session; it says AdminDown to the router on its way out,
// so that the router does not take the end of BFD for a path failure.
func (s *bfdPeer) close() { close(s.stop) }

func (s *bfdPeer) run(log logr.Logger, down, note func(string)) {
	l := &bfdLoop{peer: s, log: log, down: down, note: note, tx: time.NewTimer(0), nextTx: time.Now(), detect: time.NewTimer(time.Hour)}
	l.detect.Stop()
	defer l.close()
	for {
		select {
		case <-s.stop:
			l.stopped()
			return
		case h := <-s.rx:
			l.received(h)
		case <-l.tx.C:
			l.transmit()
		case <-l.detect.C:
			l.expired()
		}
	}
}

// bfdLoop is one peer's session loop: its socket and its two timers, the
// transmit one and the detection one. Only run's goroutine touches it.
type bfdLoop struct {
	peer       *bfdPeer
	log        logr.Logger
	down, note func(string)
	conn       *net.UDPConn
	tx, detect *time.Timer
	nextTx     time.Time
}

func (l *bfdLoop) close() {
	l.tx.Stop()
	l.detect.Stop()
	if l.conn != nil {
		_ = l.conn.Close()
	}
}

// send writes h, dialling first if need be: a packet is lost like any other
// when that fails, and so is a refusal (no BFD on the router).
func (l *bfdLoop) send(h *bfd.BFDHeader) {
	if l.conn == nil {
		var err error
		if l.conn, err = dialBFD(l.peer.addr, l.peer.cfg.Source); err != nil {
			l.log.V(1).Info("cannot send BFD packets yet", "error", err.Error())
			return
		}
	}
	if b, err := h.MarshalBinary(); err == nil {
		_, _ = l.conn.Write(b)
	}
}

func (l *bfdLoop) schedule(every time.Duration) {
	d := jitter(every, l.peer.cfg.Multiplier)
	l.tx.Reset(d)
	l.nextTx = time.Now().Add(d)
}

// stopped tells the router the session is administratively down, twice
// (one may be lost), so it does not count the end as a failure.
func (l *bfdLoop) stopped() {
	l.peer.mu.Lock()
	h := l.peer.fsm.packet(false)
	l.peer.mu.Unlock()
	h.State, h.Diagnostic = bfd.StateAdminDown, bfd.DiagnosticAdministrativelyDown
	l.send(h)
	l.send(h)
}

func (l *bfdLoop) received(h *bfd.BFDHeader) {
	s := l.peer
	s.mu.Lock()
	r := s.fsm.receive(h, time.Now())
	d, every := s.fsm.detectTime(), s.fsm.txInterval()
	var out *bfd.BFDHeader
	if r.accepted && (r.changed || r.final) {
		out = s.fsm.packet(r.final)
	}
	s.mu.Unlock()
	if !r.accepted {
		return
	}
	if out != nil {
		l.send(out)
	}
	l.detect.Reset(d)
	if every > 0 && time.Until(l.nextTx) > every {
		// The router wants packets faster than the next one is
		// due (it came up, or changed its rate): from now on.
		l.schedule(every)
	}
	if r.rebound {
		l.log.Info("the router's BFD session is a new one: this one follows it", "routerDiscriminator", h.MyDiscriminator)
	}
	if r.changed {
		l.log.Info("BFD session state", "state", out.State.String(), "routerState", h.State.String(), "routerDiagnostic", h.Diagnostic.String(),
			"routerDiscriminator", h.MyDiscriminator, "discriminator", out.MyDiscriminator,
			"routerTransmitMicroseconds", h.DesiredMinTxInterval, "routerReceiveMicroseconds", h.RequiredMinRxInterval)
	}
	if r.down != "" {
		l.down(r.down)
	}
	if r.adminDown {
		l.note(bfdAdminDown)
	}
}

func (l *bfdLoop) transmit() {
	l.peer.mu.Lock()
	every := l.peer.fsm.txInterval()
	h := l.peer.fsm.packet(false)
	l.peer.mu.Unlock()
	if every > 0 {
		l.send(h)
	} else {
		every = time.Second // the router wants no packets: look again later
	}
	l.schedule(every)
}

func (l *bfdLoop) expired() {
	s := l.peer
	now := time.Now()
	s.mu.Lock()
	before := s.fsm.state
	why := s.fsm.expire(now)
	var out *bfd.BFDHeader
	switch {
	case s.fsm.state != before:
		out = s.fsm.packet(false)
	case s.fsm.state != bfd.StateDown: // a packet came meanwhile
		l.detect.Reset(s.fsm.lastRx.Add(s.fsm.detectTime()).Sub(now))
	}
	s.mu.Unlock()
	if out != nil {
		l.send(out)
		l.log.Info("BFD session state", "state", out.State.String(), "expired", true)
	}
	if why != "" {
		l.down(why)
	}
}

// jitter is a periodic interval reduced by a random 0-25% (10-25% with a
// multiplier of 1), as RFC 5880 section 6.8.7 requires, so that sessions do
// not send in step.
func jitter(d time.Duration, mult uint8) time.Duration {
	most := 100
	if mult == 1 {
		most = 90
	}
	return d * time.Duration(75+rand.IntN(most-75+1)) / 100 //nolint:gosec // jitter spreads packets; it keeps no secret
}

// dialBFD opens the socket a session sends from: a source port in
// 49152-65535, from source when it is valid, and a TTL of 255 (RFC 5881).
func dialBFD(addr, source netip.Addr) (*net.UDPConn, error) {
	nw := network(addr)
	dst := &net.UDPAddr{IP: addr.AsSlice(), Zone: addr.Zone(), Port: bfdPort}
	var err error
	for range 16 {
		var c *net.UDPConn
		local := &net.UDPAddr{Port: 49152 + rand.IntN(16384)} //nolint:gosec // the runtime's ChaCha8, seeded by the OS (see newBFDPeer)
		if source.IsValid() {
			local.IP, local.Zone = source.AsSlice(), source.Zone()
		}
		c, err = net.DialUDP(nw, local, dst)
		if err != nil {
			continue
		}
		if nw == "udp4" {
			err = ipv4.NewConn(c).SetTTL(255)
		} else {
			err = ipv6.NewConn(c).SetHopLimit(255)
		}
		if err != nil {
			_ = c.Close()
			return nil, err
		}
		return c, nil
	}
	return nil, err
}
