package membership

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"github.com/hashicorp/memberlist"
)

// sourceBound wraps memberlist's UDP/TCP transport so that a member speaks
// only for the address it sends from (the reasoning is in doc.go):
//   - an alive claim for member N at address X is passed on at once when it
//     comes from X, or when N is alive and unsuspected here already (a
//     relayed state change); any other (a relayed join, a relayed
//     refutation of a suspicion or a death) only once N answers a ping from
//     us at X;
//   - an ack counts only from the address its ping (or indirect ping
//     request) went to.
//
// It decrypts with the member's keyring to read messages (one more AES-GCM
// open per packet, small beside the sends) and seals what it rewrites with
// the primary key, so memberlist still authenticates everything it handles.
type sourceBound struct {
	inner   memberlist.NodeAwareTransport
	keyring *memberlist.Keyring
	log     logr.Logger
	refused *atomic.Uint64
	list    atomic.Pointer[memberlist.Memberlist]
	// self is this member (name and address): claims about it are
	// memberlist's to refute, and nobody else speaks for its address.
	self     string
	selfAddr netip.Addr
	// admit is Config.Admit: a claim it refuses is not worth a ping, so a
	// forged claim cannot make us ping an address no Node has.
	admit func(node string, addr netip.Addr) error

	packets chan *memberlist.Packet
	streams chan net.Conn
	done    chan struct{}

	mu        sync.Mutex
	probes    map[uint32]probe    // sequence number → where acks may come from
	verifying map[string]struct{} // members being pinged to check an alive claim
}

type probe struct {
	from  []netip.Addr
	until time.Time
}

// probeMemory is how long an ack is awaited: beyond any probe timeout.
const probeMemory = 10 * time.Second

// maxVerifying bounds the claims checked at a time; more are dropped (a
// true claim is gossiped again).
const maxVerifying = 64

// verifyTries pings before an alive claim is refused: one lost packet does
// not refuse a live member.
const verifyTries = 2

func newSourceBound(inner memberlist.NodeAwareTransport, self string, selfAddr netip.Addr, keyring *memberlist.Keyring, refused *atomic.Uint64, log logr.Logger) *sourceBound {
	t := &sourceBound{
		inner: inner, self: self, selfAddr: selfAddr, keyring: keyring, refused: refused, log: log,
		packets:   make(chan *memberlist.Packet),
		streams:   make(chan net.Conn),
		done:      make(chan struct{}),
		probes:    map[uint32]probe{},
		verifying: map[string]struct{}{},
	}
	go t.receivePackets()
	go t.receiveStreams()
	return t
}

func (t *sourceBound) FinalAdvertiseAddr(ip string, port int) (net.IP, int, error) {
	return t.inner.FinalAdvertiseAddr(ip, port)
}

func (t *sourceBound) PacketCh() <-chan *memberlist.Packet { return t.packets }
func (t *sourceBound) StreamCh() <-chan net.Conn           { return t.streams }

func (t *sourceBound) WriteTo(b []byte, addr string) (time.Time, error) {
	t.noteProbes(b, addr)
	return t.inner.WriteTo(b, addr)
}

func (t *sourceBound) WriteToAddress(b []byte, addr memberlist.Address) (time.Time, error) {
	t.noteProbes(b, addr.Addr)
	return t.inner.WriteToAddress(b, addr)
}

func (t *sourceBound) DialTimeout(addr string, timeout time.Duration) (net.Conn, error) {
	return t.DialAddressTimeout(memberlist.Address{Addr: addr}, timeout)
}

func (t *sourceBound) DialAddressTimeout(addr memberlist.Address, timeout time.Duration) (net.Conn, error) {
	conn, err := t.inner.DialAddressTimeout(addr, timeout)
	if err != nil {
		return nil, err
	}
	ap, _ := netip.ParseAddrPort(addr.Addr)
	return &checkedConn{Conn: conn, t: t, peer: ap.Addr().Unmap()}, nil
}

// Shutdown stops the sockets first: their listeners hand over what they
// read before they stop, so this transport reads on until they have.
func (t *sourceBound) Shutdown() error {
	err := t.inner.Shutdown()
	close(t.done)
	return err
}

// noteProbes remembers where the pings and indirect ping requests in an
// outgoing packet went: the only addresses their acks may come from.
func (t *sourceBound) noteProbes(b []byte, addr string) {
	to, err := netip.ParseAddrPort(addr)
	if err != nil {
		return
	}
	plain, err := open(t.keyring.GetKeys(), b, nil)
	if err != nil {
		return
	}
	msgs, err := messages(plain)
	if err != nil {
		return
	}
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, m := range msgs {
		if k := msgType(m[0]); k != msgPing && k != msgIndirectPing {
			continue
		}
		var s seqMsg
		if decodeMsg(m[1:], &s) != nil {
			continue
		}
		p := t.probes[s.SeqNo]
		p.from, p.until = append(p.from, to.Addr().Unmap()), now.Add(probeMemory)
		t.probes[s.SeqNo] = p
	}
	if len(t.probes) > 1024 {
		for seq, p := range t.probes {
			if now.After(p.until) {
				delete(t.probes, seq)
			}
		}
	}
}

// ackFrom reports whether an ack for seq may come from src.
func (t *sourceBound) ackFrom(seq uint32, src netip.Addr) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	p, ok := t.probes[seq]
	if !ok || time.Now().After(p.until) {
		return false
	}
	for _, a := range p.from {
		if a == src {
			return true
		}
	}
	return false
}

func (t *sourceBound) receivePackets() {
	for {
		select {
		case p := <-t.inner.PacketCh():
			t.receive(p)
		case <-t.done:
			return
		}
	}
}

func (t *sourceBound) deliver(p *memberlist.Packet) {
	select {
	case t.packets <- p:
	case <-t.done:
	}
}

// receive passes a packet on, or what may be passed of it. What the keys do
// not open is passed on untouched: memberlist drops it.
func (t *sourceBound) receive(p *memberlist.Packet) {
	if len(p.Buf) == 0 || msgType(p.Buf[0]) == msgLabel {
		t.deliver(p) // no agent labels its packets: memberlist drops these
		return
	}
	plain, err := open(t.keyring.GetKeys(), p.Buf, nil)
	if err != nil {
		t.deliver(p)
		return
	}
	msgs, err := messages(plain)
	if err != nil {
		t.log.V(1).Info("gossip packet dropped", "from", p.From.String(), "reason", err.Error())
		return
	}
	src := addrOfNet(p.From)
	var kept [][]byte
	var alive map[string]bool
	for _, m := range msgs {
		switch msgType(m[0]) {
		case msgAck:
			var s seqMsg
			if decodeMsg(m[1:], &s) != nil || !t.ackFrom(s.SeqNo, src) {
				continue
			}
		case msgAlive:
			var a aliveMsg
			if decodeMsg(m[1:], &a) != nil {
				continue
			}
			if alive == nil {
				alive = t.aliveHere()
			}
			if a.Node != t.self && addrOf(a.Addr) != src && !alive[a.Node] {
				go t.verify(a, m, p)
				continue
			}
		}
		kept = append(kept, m)
	}
	if len(kept) == len(msgs) {
		t.deliver(p)
		return
	}
	for _, m := range kept {
		t.deliverSealed(m, p)
	}
}

// deliverSealed passes on one message of packet p, sealed again.
func (t *sourceBound) deliverSealed(m []byte, p *memberlist.Packet) {
	buf, err := seal(t.keyring.GetPrimaryKey(), m, nil)
	if err != nil {
		t.log.Error(err, "seal a gossip message")
		return
	}
	t.deliver(&memberlist.Packet{Buf: buf, From: p.From, Timestamp: p.Timestamp})
}

// verify passes an alive claim on once its member answers at the address
// it claims; one check per member at a time (the claim is gossiped again).
func (t *sourceBound) verify(a aliveMsg, m []byte, p *memberlist.Packet) {
	if !t.claimHolds(a) {
		return
	}
	t.deliverSealed(m, p)
}

// claimHolds pings member a.Node at the address it claims. Our own address
// answers for us alone: a ping to it would also spend the piggybacked
// broadcasts (say, our leave) on ourselves.
func (t *sourceBound) claimHolds(a aliveMsg) bool {
	list := t.list.Load()
	if list == nil {
		return false
	}
	if addrOf(a.Addr) == t.selfAddr || (t.admit != nil && t.admit(nodeOf(a.Node), addrOf(a.Addr)) != nil) {
		t.refused.Add(1)
		return false
	}
	t.mu.Lock()
	if _, busy := t.verifying[a.Node]; busy || len(t.verifying) >= maxVerifying {
		t.mu.Unlock()
		return false
	}
	t.verifying[a.Node] = struct{}{}
	t.mu.Unlock()
	defer func() {
		t.mu.Lock()
		delete(t.verifying, a.Node)
		t.mu.Unlock()
	}()
	to := &net.UDPAddr{IP: net.IP(a.Addr), Port: int(a.Port)}
	for range verifyTries {
		if _, err := list.Ping(a.Node, to); err == nil {
			return true
		}
	}
	t.refused.Add(1)
	t.log.V(1).Info("alive claim refused: no answer at the claimed address", "member", a.Node, "address", to.String())
	return false
}

// aliveHere is the members memberlist holds alive and unsuspected.
func (t *sourceBound) aliveHere() map[string]bool {
	out := map[string]bool{}
	if list := t.list.Load(); list != nil {
		for _, n := range list.Members() {
			out[n.Name] = n.State == memberlist.StateAlive
		}
	}
	return out
}

func (t *sourceBound) receiveStreams() {
	for {
		select {
		case conn := <-t.inner.StreamCh():
			wrapped := &checkedConn{Conn: conn, t: t, peer: addrOfNet(conn.RemoteAddr())}
			select {
			case t.streams <- wrapped:
			case <-t.done:
				_ = conn.Close()
				return
			}
		case <-t.done:
			return
		}
	}
}

func addrOfNet(a net.Addr) netip.Addr {
	switch a := a.(type) {
	case *net.UDPAddr:
		return addrOf(a.IP)
	case *net.TCPAddr:
		return addrOf(a.IP)
	}
	ap, _ := netip.ParseAddrPort(a.String())
	return ap.Addr().Unmap()
}

// checkedConn is a stream with a peer: the push/pull states it reads are
// checked like alive messages (each member listed alive is an alive claim
// from the peer's address), and the claims that fail are left out.
type checkedConn struct {
	net.Conn
	t       *sourceBound
	peer    netip.Addr
	pending []byte
	err     error
}

func (c *checkedConn) Read(b []byte) (int, error) {
	for len(c.pending) == 0 {
		if c.err != nil {
			return 0, c.err
		}
		c.pending, c.err = c.next()
	}
	n := copy(b, c.pending)
	c.pending = c.pending[n:]
	return n, nil
}

// next reads the next message of the stream and returns what memberlist is
// to read of it.
func (c *checkedConn) next() ([]byte, error) {
	var head [5]byte
	n, err := c.Conn.Read(head[:1])
	if n == 0 {
		return nil, err
	}
	if msgType(head[0]) != msgEncrypt {
		return head[:1], nil // memberlist refuses what is not encrypted
	}
	if _, err := io.ReadFull(c.Conn, head[1:]); err != nil {
		return head[:1], err
	}
	size := binary.BigEndian.Uint32(head[1:])
	if size > maxStreamBytes {
		return nil, fmt.Errorf("stream message of %d bytes", size)
	}
	body := make([]byte, size)
	if _, err := io.ReadFull(c.Conn, body); err != nil {
		return nil, err
	}
	whole := append(head[:], body...)
	plain, err := open(c.t.keyring.GetKeys(), body, head[:])
	if err != nil || len(plain) == 0 {
		return whole, nil // memberlist refuses it
	}
	switch msgType(plain[0]) {
	case msgCompress:
		return nil, errCompressed
	case msgPushPull:
	default:
		return whole, nil
	}
	checked, changed, err := c.t.checkPushPull(plain[1:], c.peer)
	if err != nil {
		return nil, err
	}
	if !changed {
		return whole, nil
	}
	// The length is authenticated with the rest: it goes in first.
	binary.BigEndian.PutUint32(head[1:], uint32(1+nonceSize+len(checked)+tagSize))
	sealed, err := seal(c.t.keyring.GetPrimaryKey(), checked, head[:])
	if err != nil {
		return nil, err
	}
	return append(head[:], sealed...), nil
}

// checkPushPull leaves out of a push/pull from peer the alive members whose
// claim does not hold (checked side by side), and reports whether any was.
func (t *sourceBound) checkPushPull(buf []byte, peer netip.Addr) ([]byte, bool, error) {
	h, states, user, err := decodePushPull(buf)
	if err != nil {
		return nil, false, err
	}
	alive := t.aliveHere()
	holds := make([]bool, len(states))
	var wg sync.WaitGroup
	slots := make(chan struct{}, maxJoinsInFlight)
	for i, s := range states {
		if s.State != stateAlive || s.Name == t.self || addrOf(s.Addr) == peer || alive[s.Name] {
			holds[i] = true
			continue
		}
		wg.Add(1)
		slots <- struct{}{}
		go func() {
			defer func() { <-slots; wg.Done() }()
			holds[i] = t.claimHolds(aliveMsg{Node: s.Name, Addr: s.Addr, Port: s.Port})
		}()
	}
	wg.Wait()
	kept := states[:0]
	for i, s := range states {
		if holds[i] {
			kept = append(kept, s)
		}
	}
	if len(kept) == len(holds) {
		return nil, false, nil
	}
	out, err := encodePushPull(h, kept, user)
	if err != nil {
		return nil, false, errors.Join(errors.New("re-encode push/pull"), err)
	}
	return out, true, nil
}

var _ memberlist.NodeAwareTransport = (*sourceBound)(nil)
