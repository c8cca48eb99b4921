// Package l2 makes VIPs reachable on their layer-2 segment without adding them
// to any interface: it answers ARP requests for the VIPs this node owns, sends
// gratuitous ARP when it takes one over, and listens for anyone else claiming
// them. Which VIPs this node owns is decided elsewhere (package election); the
// Speaker only does what it is told, one raw ARP socket per interface.
package l2

import (
	"bytes"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/go-logr/logr"
	"github.com/mdlayher/arp"
	"github.com/mdlayher/ethernet"
)

// Gratuitous ARP cadence on takeover: at once, then every GARPInterval until
// GARPDuration has passed (so switches and hosts that missed one see the next).
const (
	GARPInterval = 1100 * time.Millisecond
	GARPDuration = 5 * time.Second
)

// Conflict is an ARP packet from another MAC claiming a VIP this node owns:
// another host uses the address, or a second announcer answers for it.
type Conflict struct {
	VIP       netip.Addr
	MAC       net.HardwareAddr
	Interface string
}

// Speaker answers ARP for the VIPs it is given.
type Speaker struct {
	log logr.Logger
	// Ours reports MACs of the cluster's own nodes: their ARP for a VIP is a
	// hand-over in progress, not a conflict.
	ours      func(net.HardwareAddr) bool
	conflicts chan Conflict
	// probeEvery is how often each owned VIP is probed for another claimant.
	probeEvery time.Duration

	mu         sync.Mutex
	responders map[string]*responder // by interface name
}

// NewSpeaker returns a Speaker; ours may be nil (every other MAC is foreign).
func NewSpeaker(log logr.Logger, ours func(net.HardwareAddr) bool, probeEvery time.Duration) *Speaker {
	if ours == nil {
		ours = func(net.HardwareAddr) bool { return false }
	}
	return &Speaker{log: log, ours: ours, probeEvery: probeEvery, conflicts: make(chan Conflict, 64), responders: map[string]*responder{}}
}

// Conflicts delivers the conflicts heard; a slow reader loses some, never
// blocks the responders.
func (s *Speaker) Conflicts() <-chan Conflict { return s.conflicts }

// SetOwned makes the speaker answer for exactly these VIPs, each on the named
// interface. VIPs new to an interface are announced with gratuitous ARP.
// Errors name the interfaces that could not be served; the others are.
func (s *Speaker) SetOwned(owned map[netip.Addr]string) error {
	byIface := map[string][]netip.Addr{}
	for vip, iface := range owned {
		if vip.Is4() {
			byIface[iface] = append(byIface[iface], vip)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var errs []error
	for name, r := range s.responders {
		if _, ok := byIface[name]; !ok {
			r.close()
			delete(s.responders, name)
		}
	}
	for name, list := range byIface {
		r, ok := s.responders[name]
		if !ok {
			var err error
			if r, err = s.listen(name); err != nil {
				errs = append(errs, err)
				continue
			}
			s.responders[name] = r
		}
		r.set(list)
	}
	return errors.Join(errs...)
}

// Owned lists the VIPs currently answered for, by interface.
func (s *Speaker) Owned() map[netip.Addr]string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := map[netip.Addr]string{}
	for name, r := range s.responders {
		r.mu.Lock()
		for vip := range r.owned {
			out[vip] = name
		}
		r.mu.Unlock()
	}
	return out
}

// Close stops answering for every VIP.
func (s *Speaker) Close() {
	_ = s.SetOwned(nil)
}

// responder serves the VIPs of one interface.
type responder struct {
	s      *Speaker
	ifi    *net.Interface
	client *arp.Client
	done   chan struct{}

	mu    sync.Mutex
	owned map[netip.Addr]chan struct{} // VIP → closed when no longer owned
	// reported rate-limits conflict reports per VIP and MAC.
	reported map[string]time.Time
}

func (s *Speaker) listen(name string) (*responder, error) {
	ifi, err := net.InterfaceByName(name)
	if err != nil {
		return nil, err
	}
	client, err := arp.Dial(ifi)
	if err != nil {
		return nil, &net.OpError{Op: "listen arp", Net: name, Err: err}
	}
	r := &responder{s: s, ifi: ifi, client: client, done: make(chan struct{}), owned: map[netip.Addr]chan struct{}{}, reported: map[string]time.Time{}}
	go r.serve()
	if s.probeEvery > 0 {
		go r.probe()
	}
	return r, nil
}

func (r *responder) set(vips []netip.Addr) {
	want := map[netip.Addr]bool{}
	for _, v := range vips {
		want[v] = true
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for vip, gone := range r.owned {
		if !want[vip] {
			close(gone)
			delete(r.owned, vip)
		}
	}
	for vip := range want {
		if _, ok := r.owned[vip]; !ok {
			gone := make(chan struct{})
			r.owned[vip] = gone
			go r.announce(vip, gone)
		}
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
	for vip, gone := range r.owned {
		close(gone)
		delete(r.owned, vip)
	}
	r.mu.Unlock()
	close(r.done)
	_ = r.client.Close() // ends serve's Read
}

// announce sends gratuitous ARP for vip: at once, then every GARPInterval for
// GARPDuration, unless the VIP is given up meanwhile.
func (r *responder) announce(vip netip.Addr, gone <-chan struct{}) {
	tick := time.NewTicker(GARPInterval)
	defer tick.Stop()
	deadline := time.Now().Add(GARPDuration)
	for {
		if err := r.garp(vip); err != nil {
			r.s.log.Error(err, "gratuitous ARP", "vip", vip, "interface", r.ifi.Name)
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

// garp broadcasts a gratuitous ARP request (sender = target = vip), which
// updates the entry of every host that already has one for the VIP.
func (r *responder) garp(vip netip.Addr) error {
	p, err := arp.NewPacket(arp.OperationRequest, r.ifi.HardwareAddr, vip, ethernet.Broadcast, vip)
	if err != nil {
		return err
	}
	return r.client.WriteTo(p, ethernet.Broadcast)
}

// serve answers requests for owned VIPs and watches for other claimants.
func (r *responder) serve() {
	for {
		p, _, err := r.client.Read()
		if err != nil {
			select {
			case <-r.done:
				return
			default:
			}
			// A link going down does not end the socket; anything else is
			// unexpected: retry after a pause rather than spin.
			r.s.log.Error(err, "read ARP", "interface", r.ifi.Name)
			time.Sleep(100 * time.Millisecond)
			continue
		}
		if bytes.Equal(p.SenderHardwareAddr, r.ifi.HardwareAddr) {
			continue // our own packet, seen on the way out
		}
		if r.owns(p.SenderIP) && !r.s.ours(p.SenderHardwareAddr) {
			r.conflict(p.SenderIP, p.SenderHardwareAddr)
		}
		if p.Operation == arp.OperationRequest && p.SenderIP != p.TargetIP && r.owns(p.TargetIP) {
			if err := r.client.Reply(p, r.ifi.HardwareAddr, p.TargetIP); err != nil {
				r.s.log.Error(err, "ARP reply", "vip", p.TargetIP, "interface", r.ifi.Name)
			}
		}
	}
}

// probe asks, now and then, who else has each owned VIP (an RFC 5227 probe,
// sender address 0.0.0.0): a host using the address answers, and serve
// reports it. Gratuitous ARP from a second announcer is heard without asking.
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
			p, err := arp.NewPacket(arp.OperationRequest, r.ifi.HardwareAddr, netip.IPv4Unspecified(), ethernet.Broadcast, vip)
			if err == nil {
				err = r.client.WriteTo(p, ethernet.Broadcast)
			}
			if err != nil {
				r.s.log.Error(err, "ARP probe", "vip", vip, "interface", r.ifi.Name)
			}
		}
	}
}

func (r *responder) conflict(vip netip.Addr, mac net.HardwareAddr) {
	key := vip.String() + "/" + mac.String()
	r.mu.Lock()
	last, seen := r.reported[key]
	if seen && time.Since(last) < time.Minute {
		r.mu.Unlock()
		return
	}
	r.reported[key] = time.Now()
	r.mu.Unlock()
	select {
	case r.s.conflicts <- Conflict{VIP: vip, MAC: append(net.HardwareAddr(nil), mac...), Interface: r.ifi.Name}:
	default:
	}
}
