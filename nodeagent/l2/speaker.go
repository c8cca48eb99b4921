// Package l2 makes VIPs reachable on their layer-2 segment without adding them
// to any interface: it answers ARP requests (IPv4) and Neighbor Solicitations
// (IPv6) for the VIPs this node owns, announces a VIP when it takes it over
// (gratuitous ARP, unsolicited Neighbor Advertisement), and listens for anyone
// else claiming them. Which VIPs this node owns is decided elsewhere (package
// election); the Speaker only does what it is told.
//
// The two families share everything but the wire: the set of owned VIPs, the
// takeover cadence, probing and conflict reporting live here, once; arp.go and
// ndp.go only read, answer and send packets.
package l2

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"golang.org/x/time/rate"
)

// Takeover announcement cadence, for both families: at once, then every
// GARPInterval until GARPDuration has passed (so switches and hosts that missed
// one see the next).
const (
	GARPInterval = 1100 * time.Millisecond
	GARPDuration = 5 * time.Second
)

// Conflict is a packet from another MAC claiming a VIP this node owns (an ARP
// packet sent from the VIP, or a Neighbor Advertisement for it): another host
// uses the address, or a second announcer answers for it.
type Conflict struct {
	VIP       netip.Addr
	MAC       net.HardwareAddr
	Interface string
}

// Speaker answers ARP and NDP for the VIPs it is given.
type Speaker struct {
	log logr.Logger
	// Ours reports MACs of the cluster's own nodes: their claim of a VIP is a
	// hand-over in progress, not a conflict.
	ours      func(net.HardwareAddr) bool
	conflicts chan Conflict
	// probeEvery is how often each owned VIP is probed for another claimant.
	probeEvery time.Duration
	// claimLimit is the speaker-wide part of the claim gate (claims.go).
	claimLimit *rate.Limiter
	// claimsIgnored counts claims of owned VIPs the gate let through
	// without a look.
	claimsIgnored atomic.Uint64

	mu         sync.Mutex
	responders map[link]*responder
}

// link is where a responder serves: one interface, one family.
type link struct {
	iface string
	ipv6  bool
}

// NewSpeaker returns a Speaker; ours may be nil (every other MAC is foreign).
func NewSpeaker(log logr.Logger, ours func(net.HardwareAddr) bool, probeEvery time.Duration) *Speaker {
	if ours == nil {
		ours = func(net.HardwareAddr) bool { return false }
	}
	return &Speaker{log: log, ours: ours, probeEvery: probeEvery, conflicts: make(chan Conflict, 64), responders: map[link]*responder{},
		claimLimit: rate.NewLimiter(claimsPerSecond, claimsBurst)}
}

// ClaimsIgnored counts the claims of owned VIPs by other MACs that were not
// looked at: a MAC already looked at lately, or over the rate limits (a flood).
func (s *Speaker) ClaimsIgnored() uint64 { return s.claimsIgnored.Load() }

// Conflicts delivers the conflicts heard; a slow reader loses some, never
// blocks the responders.
func (s *Speaker) Conflicts() <-chan Conflict { return s.conflicts }

// SetOwned makes the speaker answer for exactly these VIPs, each on the named
// interface. VIPs new to an interface are announced at once. Errors name the
// interfaces that could not be served; the others are.
func (s *Speaker) SetOwned(owned map[netip.Addr]string) error {
	return s.SetAnswering(owned, nil)
}

// SetAnswering is SetOwned for owned plus releasing: VIPs this node handed
// over and still answers questions about for a while, but announces no more.
// Its gratuitous ARPs would pull clients back from the new owner, which has
// just announced itself. A releasing VIP owned again is announced afresh.
func (s *Speaker) SetAnswering(owned, releasing map[netip.Addr]string) error {
	byLink := map[link][]netip.Addr{}
	quiet := map[netip.Addr]bool{}
	for _, set := range []map[netip.Addr]string{owned, releasing} {
		for vip, iface := range set {
			vip = vip.Unmap()
			if _, isOwned := owned[vip]; !isOwned {
				quiet[vip] = true
			}
			l := link{iface: iface, ipv6: vip.Is6()}
			byLink[l] = append(byLink[l], vip)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for l, r := range s.responders {
		if _, ok := byLink[l]; !ok {
			r.close()
			delete(s.responders, l)
		}
	}
	for l, list := range byLink {
		r, ok := s.responders[l]
		if !ok {
			var err error
			if r, err = s.listen(l); err != nil {
				errs = append(errs, err)
				continue
			}
			s.responders[l] = r
		}
		r.set(list, quiet)
	}
	return errors.Join(errs...)
}

// Owned lists the VIPs currently answered for, by interface.
func (s *Speaker) Owned() map[netip.Addr]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[netip.Addr]string{}
	for l, r := range s.responders {
		r.mu.Lock()
		for vip := range r.owned {
			out[vip] = l.iface
		}
		r.mu.Unlock()
	}
	return out
}

// FirstAnnounced waits until the last announcement of vip started (a
// gratuitous ARP, or an unsolicited Neighbor Advertisement) has sent its
// first packet, and returns when it did: zero when vip is not answered for,
// or ctx ends first (the sends failed).
func (s *Speaker) FirstAnnounced(ctx context.Context, vip netip.Addr) time.Time {
	vip = vip.Unmap()
	var first *firstSend
	s.mu.Lock()
	for l, r := range s.responders {
		if l.ipv6 != vip.Is6() {
			continue
		}
		r.mu.Lock()
		if a, ok := r.owned[vip]; ok && a.first != nil {
			first = a.first
		}
		r.mu.Unlock()
	}
	s.mu.Unlock()
	if first == nil {
		return time.Time{}
	}
	select {
	case <-first.done:
		return first.at
	case <-ctx.Done():
		return time.Time{}
	}
}

// Close stops answering for every VIP.
func (s *Speaker) Close() {
	_ = s.SetOwned(nil)
}

// wire is one family's protocol on one interface: ARP or NDP.
type wire interface {
	// protocol names it in logs: "ARP" or "NDP".
	protocol() string
	// next blocks until the next packet worth a look and says what it means.
	next() (heard, error)
	// answer replies to a question next reported, for a VIP we own.
	answer(h heard) error
	// announce tells the segment that vip is here now (gratuitous ARP,
	// unsolicited Neighbor Advertisement with Override).
	announce(vip netip.Addr) error
	// probe asks whether anyone else has vip.
	probe(vip netip.Addr) error
	// detect asks whether anyone has vip before this node uses it, as a
	// host configuring the address does (probe.go): it claims nothing.
	detect(vip netip.Addr) error
	// start and stop bracket the time vip is owned (NDP joins and leaves its
	// solicited-node multicast group).
	start(vip netip.Addr) error
	stop(vip netip.Addr) error
	close() error
}

// heard is what a packet means to the responder: someone claims an address
// for a MAC, or asks who has an address, or both (an ARP request does).
type heard struct {
	claimed netip.Addr // invalid: no claim
	claimer net.HardwareAddr
	asked   netip.Addr // invalid: no question
	packet  any        // what answer needs to reply
}

// responder serves the VIPs of one family on one interface.
type responder struct {
	s    *Speaker
	ifi  *net.Interface
	w    wire
	done chan struct{}

	mu    sync.Mutex
	owned map[netip.Addr]*answering
}

// openWire opens l's interface for ARP (IPv4) or NDP (IPv6): the responder's
// and the prober's own socket alike.
func openWire(l link) (*net.Interface, wire, error) {
	ifi, err := net.InterfaceByName(l.iface)
	if err != nil {
		return nil, nil, err
	}
	var w wire
	if l.ipv6 {
		w, err = listenNDP(ifi)
	} else {
		w, err = listenARP(ifi)
	}
	return ifi, w, err
}

func (s *Speaker) listen(l link) (*responder, error) {
	ifi, w, err := openWire(l)
	if err != nil {
		return nil, err
	}
	r := &responder{s: s, ifi: ifi, w: w, done: make(chan struct{}), owned: map[netip.Addr]*answering{}}
	go r.serve()
	if s.probeEvery > 0 {
		go r.probe()
	}
	return r, nil
}

// answering is one VIP a responder answers for.
type answering struct {
	// hush is closed to end the gratuitous announcements (the VIP is handed
	// over, or no longer answered for); nil once hushed.
	hush chan struct{}
	// wasQuiet: hushed because handed over, so owning it again announces it.
	wasQuiet bool
	// claims gates the claims of the VIP by other MACs.
	claims *claimants
	// first is the first packet of the last announcement started (nil: none).
	first *firstSend
}

// firstSend is when an announcement first went out: done is closed once at
// is set.
type firstSend struct {
	done chan struct{}
	at   time.Time
}

func (a *answering) quiet() {
	if a.hush != nil {
		close(a.hush)
		a.hush = nil
	}
	a.wasQuiet = true
}

// set answers for exactly vips; those in quiet are not announced.
func (r *responder) set(vips []netip.Addr, quiet map[netip.Addr]bool) {
	want := map[netip.Addr]bool{}
	for _, v := range vips {
		want[v] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for vip, a := range r.owned {
		if !want[vip] {
			a.quiet()
			delete(r.owned, vip)
			if err := r.w.stop(vip); err != nil {
				r.s.log.Error(err, "stop answering", "protocol", r.w.protocol(), "vip", vip, "interface", r.ifi.Name)
			}
		}
	}
	for vip := range want {
		a, ok := r.owned[vip]
		switch {
		case ok && quiet[vip]:
			a.quiet()
			continue
		case ok && (a.hush != nil || !a.wasQuiet):
			continue // announced already, or being announced
		case !ok:
			if err := r.w.start(vip); err != nil {
				// Not owned, so the next SetOwned tries again.
				r.s.log.Error(err, "start answering", "protocol", r.w.protocol(), "vip", vip, "interface", r.ifi.Name)
				continue
			}
			a = &answering{claims: newClaimants()}
			r.owned[vip] = a
			if quiet[vip] {
				a.wasQuiet = true
				continue
			}
		}
		// New, or owned again after being handed over: announce.
		a.hush, a.wasQuiet = make(chan struct{}), false
		a.first = &firstSend{done: make(chan struct{})}
		go r.announce(vip, a.hush, a.first)
	}
}

func (r *responder) owns(vip netip.Addr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	_, ok := r.owned[vip]
	return ok
}

func (r *responder) close() {
	r.mu.Lock()
	for vip, a := range r.owned {
		a.quiet()
		delete(r.owned, vip)
	}
	r.mu.Unlock()
	close(r.done)
	_ = r.w.close() // ends serve's read; group memberships go with the socket
}

// announce announces vip at once, then every GARPInterval for GARPDuration,
// unless the VIP is given up meanwhile; first learns when a packet first went
// out.
func (r *responder) announce(vip netip.Addr, gone <-chan struct{}, first *firstSend) {
	tick := time.NewTicker(GARPInterval)
	defer tick.Stop()
	deadline := time.Now().Add(GARPDuration)
	sent := false
	for {
		if err := r.w.announce(vip); err != nil {
			r.s.log.Error(err, "announce", "protocol", r.w.protocol(), "vip", vip, "interface", r.ifi.Name)
		} else if !sent {
			first.at, sent = time.Now(), true
			close(first.done)
		}
		select {
		case <-gone:
			return
		case <-r.done:
			return
		case now := <-tick.C:
			if now.After(deadline) {
				return
			}
		}
	}
}

// serve answers questions about owned VIPs and watches for other claimants.
func (r *responder) serve() {
	for {
		h, err := r.w.next()
		if err != nil {
			select {
			case <-r.done:
				return
			default:
			}
			// A link going down does not end the socket; anything else is
			// unexpected: retry after a pause rather than spin.
			r.s.log.Error(err, "read", "protocol", r.w.protocol(), "interface", r.ifi.Name)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		// The gate comes before the look (ours may be costly), and both
		// before nothing else: the answer below never waits for them.
		if h.claimed.IsValid() && !bytes.Equal(h.claimer, r.ifi.HardwareAddr) && r.admitClaim(h.claimed, h.claimer) && !r.s.ours(h.claimer) {
			r.conflict(h.claimed, h.claimer)
		}
		if h.asked.IsValid() && r.owns(h.asked) {
			if err := r.w.answer(h); err != nil {
				r.s.log.Error(err, "answer", "protocol", r.w.protocol(), "vip", h.asked, "interface", r.ifi.Name)
			}
		}
	}
}

// probe asks, now and then, who else has each owned VIP (RFC 5227 for ARP,
// a Neighbor Solicitation for NDP): a host using the address answers, and
// serve reports it. Announcements of a second announcer are heard without
// asking.
func (r *responder) probe() {
	tick := time.NewTicker(r.s.probeEvery)
	defer tick.Stop()
	for {
		select {
		case <-r.done:
			return
		case <-tick.C:
		}
		r.mu.Lock()
		vips := make([]netip.Addr, 0, len(r.owned))
		for v := range r.owned {
			vips = append(vips, v)
		}
		r.mu.Unlock()
		for _, vip := range vips {
			if err := r.w.probe(vip); err != nil {
				r.s.log.Error(err, "probe", "protocol", r.w.protocol(), "vip", vip, "interface", r.ifi.Name)
			}
		}
	}
}

// admitClaim reports whether a claim of vip by mac is worth a look: vip is
// owned and the claim passes the gate (claims.go).
func (r *responder) admitClaim(vip netip.Addr, mac net.HardwareAddr) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	a, ok := r.owned[vip]
	if !ok {
		return false
	}
	if !a.claims.admit(mac, time.Now(), r.s.claimLimit) {
		r.s.claimsIgnored.Add(1)
		return false
	}
	return true
}

func (r *responder) conflict(vip netip.Addr, mac net.HardwareAddr) {
	select {
	case r.s.conflicts <- Conflict{VIP: vip, MAC: append(net.HardwareAddr(nil), mac...), Interface: r.ifi.Name}:
	default:
	}
}
