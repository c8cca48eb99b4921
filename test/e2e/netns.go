// Package e2e tests the data path for real: network namespaces made by the test
// (a client, nodes, backends, joined by bridges in a "switch" namespace), real
// agents in the node namespaces talking to a real API server, real curl.
// Addresses come from the documentation ranges only; everything is deleted at
// the end, also on failure.
package e2e

import (
	"fmt"
	"io"
	"net"
	"os/exec"
	"strings"
	"sync"
	"testing"

	"golang.org/x/sys/unix"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
)

// lab is a set of network namespaces owned by one test.
type lab struct {
	t      testing.TB
	prefix string
	// fwd are the forwarders' connections; while down, a forwarder drops
	// every connection (an API server the agents cannot reach).
	fwd struct {
		sync.Mutex
		down  bool
		conns map[net.Conn]struct{}
	}
}

func newLab(t testing.TB) *lab {
	l := &lab{t: t, prefix: fmt.Sprintf("vipa%d-", unix.Getpid()%100000)}
	t.Cleanup(l.destroy)
	return l
}

// ns is the full name of the lab namespace called short.
func (l *lab) ns(short string) string { return l.prefix + short }

func (l *lab) run(args ...string) string {
	l.t.Helper()
	out, err := exec.Command(args[0], args[1:]...).CombinedOutput()
	if err != nil {
		l.t.Fatalf("%s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// in runs a command inside namespace short.
func (l *lab) in(short string, args ...string) string {
	l.t.Helper()
	return l.run(append([]string{"ip", "netns", "exec", l.ns(short)}, args...)...)
}

func (l *lab) addNS(names ...string) {
	for _, n := range names {
		l.run("ip", "netns", "add", l.ns(n))
		l.in(n, "ip", "link", "set", "lo", "up")
		l.in(n, "sysctl", "-qw", "net.ipv4.ip_forward=1")
		l.in(n, "sysctl", "-qw", "net.ipv6.conf.all.forwarding=1")
		l.in(n, "sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0")
		l.in(n, "sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
	}
}

// addBridge makes bridge name in the switch namespace.
func (l *lab) addBridge(name string) {
	l.in("sw", "ip", "link", "add", name, "type", "bridge")
	l.in("sw", "ip", "link", "set", name, "up")
}

// plug joins namespace short to bridge br with interface ifname and addresses.
func (l *lab) plug(short, ifname, br string, addrs ...string) {
	peer := fmt.Sprintf("%s-%s", short, ifname)
	if len(peer) > 15 {
		peer = peer[:15]
	}
	l.run("ip", "link", "add", ifname, "netns", l.ns(short), "type", "veth", "peer", "name", peer, "netns", l.ns("sw"))
	l.in("sw", "ip", "link", "set", peer, "master", br, "up")
	for _, a := range addrs {
		l.in(short, "ip", "addr", "add", a, "dev", ifname)
	}
	l.in(short, "ip", "link", "set", ifname, "up")
}

func (l *lab) destroy() {
	out, _ := exec.Command("ip", "netns", "list").Output()
	for _, line := range strings.Split(string(out), "\n") {
		if name, _, _ := strings.Cut(line, " "); strings.HasPrefix(name, l.prefix) {
			_ = exec.Command("ip", "netns", "delete", name).Run()
		}
	}
}

// listen opens a TCP listener inside namespace short. A socket stays in the
// namespace it was created in, so the test can serve from any goroutine.
func (l *lab) listen(short, addr string) net.Listener {
	l.t.Helper()
	var ln net.Listener
	err := l.inNetns(short, func() (err error) {
		ln, err = net.Listen("tcp", addr)
		return err
	})
	if err != nil {
		l.t.Fatalf("listen %s in %s: %v", addr, short, err)
	}
	l.t.Cleanup(func() { ln.Close() })
	return ln
}

// inNetns runs f on an OS thread switched into namespace short, then switches back.
func (l *lab) inNetns(short string, f func() error) error { return netnstest.Do(l.ns(short), f) }

// forward makes the API server (on the root namespace's loopback) reachable at
// listen inside namespace short, as a node reaches its control plane.
func (l *lab) forward(short, listen, target string) {
	ln := l.listen(short, listen)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			if !l.track(c) {
				c.Close()
				continue
			}
			go func() {
				defer l.untrack(c)
				up, err := net.Dial("tcp", target)
				if err != nil {
					return
				}
				defer up.Close()
				go io.Copy(up, c)
				io.Copy(c, up)
			}()
		}
	}()
}

// track registers a forwarded connection; false while the forwarders are down.
func (l *lab) track(c net.Conn) bool {
	l.fwd.Lock()
	defer l.fwd.Unlock()
	if l.fwd.down {
		return false
	}
	if l.fwd.conns == nil {
		l.fwd.conns = map[net.Conn]struct{}{}
	}
	l.fwd.conns[c] = struct{}{}
	return true
}

func (l *lab) untrack(c net.Conn) {
	l.fwd.Lock()
	defer l.fwd.Unlock()
	c.Close()
	delete(l.fwd.conns, c)
}

// forwardersDown cuts every forwarded connection and refuses new ones until
// forwardersUp: to the agents, the API server is gone.
func (l *lab) forwardersDown() {
	l.fwd.Lock()
	defer l.fwd.Unlock()
	l.fwd.down = true
	for c := range l.fwd.conns {
		c.Close()
	}
}

func (l *lab) forwardersUp() {
	l.fwd.Lock()
	defer l.fwd.Unlock()
	l.fwd.down = false
}
