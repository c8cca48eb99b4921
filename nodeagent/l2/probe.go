package l2

import (
	"bytes"
	"context"
	"errors"
	"net"
	"net/netip"
	"sync"
	"time"
)

// Probing before the first announcement: an address handed out for the first
// time may already be in use on the LAN (a router, a printer, a host
// configured by hand). Announcing it would point every host's neighbour entry
// for it at this node, the router's included. So the owner asks first, as a
// host configuring an address does (RFC 5227 for IPv4, duplicate address
// detection of RFC 4862 for IPv6), without answering for the address or
// announcing it meanwhile: whoever uses the address answers, and is heard.
//
// A probe uses sockets of its own for its second or so: the responders serve
// only the VIPs this node answers for, and a probed VIP is not one of them.

// Probe asks tries times, interval apart, whether a host on the LAN uses each
// of vips (by the interface to ask on), and waits interval after the last
// ask. It returns, for each VIP some host claimed, the MAC of the first one;
// the cluster's own nodes (ours) and this node do not count. A VIP absent
// from the answer met silence. Errors name the interfaces that could not be
// probed; their VIPs are absent from the answer too, so a caller must not
// take absence for silence when err is not nil. ctx ends the probe early
// (with ctx's error).
func (s *Speaker) Probe(ctx context.Context, vips map[netip.Addr]string, tries int, interval time.Duration) (map[netip.Addr]net.HardwareAddr, error) {
	byLink := map[link][]netip.Addr{}
	for vip, iface := range vips {
		vip = vip.Unmap()
		l := link{iface: iface, ipv6: vip.Is6()}
		byLink[l] = append(byLink[l], vip)
	}
	var (
		mu      sync.Mutex
		claimed = map[netip.Addr]net.HardwareAddr{}
		errs    []error
		wg      sync.WaitGroup
	)
	for l, list := range byLink {
		p, err := s.openProbe(l, list)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			heard := p.run(ctx, tries, interval)
			mu.Lock()
			defer mu.Unlock()
			for vip, mac := range heard {
				claimed[vip] = mac
			}
		}()
	}
	wg.Wait()
	if err := ctx.Err(); err != nil {
		errs = append(errs, err)
	}
	return claimed, errors.Join(errs...)
}

// prober probes some VIPs of one family on one interface.
type prober struct {
	s    *Speaker
	ifi  *net.Interface
	w    wire
	vips map[netip.Addr]bool
	// closing is closed before the wire is: read errors after it end listen.
	closing chan struct{}

	mu    sync.Mutex
	heard map[netip.Addr]net.HardwareAddr
}

func (s *Speaker) openProbe(l link, vips []netip.Addr) (*prober, error) {
	ifi, w, err := openWire(l)
	if err != nil {
		return nil, err
	}
	p := &prober{s: s, ifi: ifi, w: w, vips: map[netip.Addr]bool{}, closing: make(chan struct{}), heard: map[netip.Addr]net.HardwareAddr{}}
	for _, vip := range vips {
		p.vips[vip] = true
	}
	return p, nil
}

// run sends the probes and listens until the last one's interval is over,
// then closes the wire.
func (p *prober) run(ctx context.Context, tries int, interval time.Duration) map[netip.Addr]net.HardwareAddr {
	listening := make(chan struct{})
	go func() {
		defer close(listening)
		p.listen()
	}()
	tick := time.NewTicker(interval)
	defer tick.Stop()
probing:
	for range tries {
		for vip := range p.vips {
			if p.answered(vip) {
				continue
			}
			if err := p.w.detect(vip); err != nil {
				p.s.log.Error(err, "probe before announcing", "protocol", p.w.protocol(), "vip", vip, "interface", p.ifi.Name)
			}
		}
		select {
		case <-ctx.Done():
			break probing
		case <-tick.C:
		}
		if p.allAnswered() {
			break
		}
	}
	close(p.closing)
	_ = p.w.close()
	<-listening
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.heard
}

// listen records the first foreign claim of each probed VIP until the wire
// closes.
func (p *prober) listen() {
	for {
		h, err := p.w.next()
		if err != nil {
			select {
			case <-p.closing:
				return
			default:
				// One packet lost; an answer may still come.
				time.Sleep(10 * time.Millisecond)
				continue
			}
		}
		if !h.claimed.IsValid() || !p.vips[h.claimed] || bytes.Equal(h.claimer, p.ifi.HardwareAddr) || p.s.ours(h.claimer) {
			continue
		}
		p.mu.Lock()
		if _, ok := p.heard[h.claimed]; !ok {
			p.heard[h.claimed] = append(net.HardwareAddr(nil), h.claimer...)
		}
		p.mu.Unlock()
	}
}

func (p *prober) answered(vip netip.Addr) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	_, ok := p.heard[vip]
	return ok
}

func (p *prober) allAnswered() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.heard) == len(p.vips)
}
