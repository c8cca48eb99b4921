// Package arpflood plays a hostile LAN neighbour: it sends forged ARP replies
// claiming an address, each from a new random MAC, at a fixed rate. It is for
// tests and benchmarks only (make bench-arpflood and its smoke test), which
// measure what such a flood costs the agent that owns the address.
package arpflood

import (
	"crypto/rand"
	"fmt"
	"net"
	"net/netip"
	"runtime"
	"time"

	"github.com/mdlayher/arp"
	"golang.org/x/sys/unix"
)

// Sender sends from one interface of one network namespace.
type Sender struct {
	client *arp.Client
}

// Dial opens a raw ARP socket on iface inside the network namespace netns
// (a name under /run/netns). The socket stays in that namespace; the caller's
// thread does not.
func Dial(netns, iface string) (*Sender, error) {
	type result struct {
		s   *Sender
		err error
	}
	done := make(chan result, 1)
	go func() {
		// The thread is switched and never switched back: unlocked threads
		// return to the pool, this one exits with the goroutine.
		runtime.LockOSThread()
		fd, err := unix.Open("/run/netns/"+netns, unix.O_RDONLY|unix.O_CLOEXEC, 0)
		if err != nil {
			done <- result{err: fmt.Errorf("open netns %s: %w", netns, err)}
			return
		}
		defer unix.Close(fd)
		if err := unix.Setns(fd, unix.CLONE_NEWNET); err != nil {
			done <- result{err: fmt.Errorf("setns %s: %w", netns, err)}
			return
		}
		ifi, err := net.InterfaceByName(iface)
		if err != nil {
			done <- result{err: err}
			return
		}
		c, err := arp.Dial(ifi)
		if err != nil {
			done <- result{err: fmt.Errorf("dial arp on %s in %s: %w", iface, netns, err)}
			return
		}
		done <- result{s: &Sender{client: c}}
	}()
	r := <-done
	return r.s, r.err
}

// Close closes the socket.
func (s *Sender) Close() error { return s.client.Close() }

// Flood sends ARP replies "vip is at <random MAC>" to the host at toMAC/toIP
// (unicast: only that host hears them, the segment's other hosts keep their
// entries), perSecond of them for d, each from a new MAC. It returns how many
// it sent.
func (s *Sender) Flood(vip, toIP netip.Addr, toMAC net.HardwareAddr, perSecond int, d time.Duration) (int, error) {
	start := time.Now()
	sent := 0
	mac := make(net.HardwareAddr, 6)
	for {
		elapsed := time.Since(start)
		if elapsed >= d {
			return sent, nil
		}
		// Catch up with the schedule, then sleep a millisecond: the rate
		// holds on average whatever the sleeps' precision.
		for due := int(elapsed.Seconds() * float64(perSecond)); sent < due; sent++ {
			_, _ = rand.Read(mac)
			mac[0] = mac[0]&^1 | 2 // unicast, locally administered
			p, err := arp.NewPacket(arp.OperationReply, mac, vip, toMAC, toIP)
			if err != nil {
				return sent, err
			}
			if err := s.client.WriteTo(p, toMAC); err != nil {
				return sent, fmt.Errorf("send claim %d: %w", sent, err)
			}
		}
		time.Sleep(time.Millisecond)
	}
}
