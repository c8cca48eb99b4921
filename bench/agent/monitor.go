package main

import (
	"bytes"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/mdlayher/netlink"
	"golang.org/x/sys/unix"
)

// monitor follows one node namespace's nftables changes as the kernel commits them: it joins
// the netlink multicast group that 'nft monitor' reads (NFNLGRP_NFTABLES), so it costs the
// writer nothing and needs no listing of a ruleset that holds 100,000 endpoints. The kernel
// sends a transaction's notifications after the transaction is committed, so the first message
// naming an address means the whole transaction is in force.
//
// Both writers put an endpoint's address in the messages as its 16 raw bytes: kube-proxy in the
// dnat rule of the endpoint's chain, our plane in the endpoint map's elements. That is all the
// monitor looks for (every address of the bench is in 2001:db8::/32, so it scans for that prefix).
type monitor struct {
	conn *netlink.Conn

	mu       sync.Mutex
	waiting  map[[16]byte]chan time.Time // address -> who waits for it
	pending  map[[16]byte]bool           // the cold start's addresses not yet seen
	coldDone chan time.Time
	overflow int // ENOBUFS: the socket dropped notifications
	err      error
	last     time.Time // the last notification
}

var docPrefix = []byte{0x20, 0x01, 0x0d, 0xb8}

// newMonitor subscribes in network namespace ns (a name under /run/netns).
func newMonitor(ns string) (*monitor, error) {
	f, err := os.Open("/run/netns/" + ns)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	c, err := netlink.Dial(unix.NETLINK_NETFILTER, &netlink.Config{NetNS: int(f.Fd()), Groups: 1 << (unix.NFNLGRP_NFTABLES - 1)})
	if err != nil {
		return nil, fmt.Errorf("nftables monitor in %s: %w", ns, err)
	}
	// A cold start is one transaction of several hundred thousand messages: the socket must
	// hold what the reader has not taken yet, or the kernel drops them (counted as overflow).
	raw, err := c.SyscallConn()
	if err == nil {
		_ = raw.Control(func(fd uintptr) { _ = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUFFORCE, 1<<30) })
	}
	m := &monitor{conn: c, waiting: map[[16]byte]chan time.Time{}}
	go m.read()
	return m, nil
}

func (m *monitor) read() {
	for {
		msgs, err := m.conn.Receive()
		now := time.Now()
		if err != nil {
			if errors.Is(err, unix.ENOBUFS) {
				m.mu.Lock()
				m.overflow++
				m.mu.Unlock()
				continue
			}
			m.mu.Lock()
			m.err = err
			m.mu.Unlock()
			return
		}
		m.mu.Lock()
		m.last = now
		for _, msg := range msgs {
			m.scan(msg.Data, now)
		}
		m.mu.Unlock()
	}
}

// scan looks for the bench's addresses in one message.
func (m *monitor) scan(data []byte, now time.Time) {
	for off := 0; ; {
		i := bytes.Index(data[off:], docPrefix)
		if i < 0 || off+i+16 > len(data) {
			return
		}
		var a [16]byte
		copy(a[:], data[off+i:off+i+16])
		if ch, ok := m.waiting[a]; ok {
			ch <- now
			delete(m.waiting, a)
		}
		if m.pending != nil && m.pending[a] {
			delete(m.pending, a)
			if len(m.pending) == 0 {
				m.coldDone <- now
				m.pending = nil
			}
		}
		off += i + 1
	}
}

// expect returns a channel that receives the time the kernel first committed a message
// holding addr. Call it before the change is made.
func (m *monitor) expect(addr netip.Addr) <-chan time.Time {
	ch := make(chan time.Time, 1)
	m.mu.Lock()
	m.waiting[addr.As16()] = ch
	m.mu.Unlock()
	return ch
}

// expectAll returns a channel that receives the time every one of addrs was committed.
func (m *monitor) expectAll(addrs []netip.Addr) <-chan time.Time {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.pending = make(map[[16]byte]bool, len(addrs))
	for _, a := range addrs {
		m.pending[a.As16()] = true
	}
	m.coldDone = make(chan time.Time, 1)
	return m.coldDone
}

// quietFor is how long the namespace's rules have not changed.
func (m *monitor) quietFor() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	return time.Since(m.last)
}

// missing is how many of expectAll's addresses are not in yet.
func (m *monitor) missing() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pending)
}

// trouble reports dropped notifications or a dead socket: figures measured with either are
// not to be trusted.
func (m *monitor) trouble() error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.err != nil {
		return fmt.Errorf("nftables monitor: %w", m.err)
	}
	if m.overflow > 0 {
		return fmt.Errorf("nftables monitor: the kernel dropped notifications %d times (socket buffer full)", m.overflow)
	}
	return nil
}

func (m *monitor) close() { _ = m.conn.Close() }
