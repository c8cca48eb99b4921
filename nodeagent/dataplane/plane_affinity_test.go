//go:build root

package dataplane

import (
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
)

// TestAffinityTraffic sends real connections through each plane to a Service with session
// affinity ClientIP: a client sticks to one endpoint, through full Syncs too; when that
// endpoint goes it sticks to another; with affinity switched off its connections spread again.
func TestAffinityTraffic(t *testing.T) {
	for _, plane := range []string{"nft", "legacy", PlaneNFTables} {
		for _, local := range []bool{false, true} {
			name := plane + "/cluster"
			if local {
				name = plane + "/local"
			}
			t.Run(name, func(t *testing.T) {
				enterNetns(t)
				testAffinityTraffic(t, plane, local)
			})
		}
	}
}

// affinityClients are the two clients' addresses, affinityEndpoints the endpoints'.
var (
	affinityClients   = []string{"198.51.100.1", "198.51.100.4"}
	affinityEndpoints = []string{"198.51.100.2", "198.51.100.3", "198.51.100.5"}
)

func testAffinityTraffic(t *testing.T, plane string, local bool) {
	netnstest.Veth(t, "vipa0", "", "vipa1")
	for _, a := range slices.Concat(affinityClients, affinityEndpoints) {
		cmd(t, "ip", "addr", "add", a+"/32", "dev", "vipa0")
	}
	cmd(t, "ip", "route", "add", "192.0.2.0/24", "dev", "vipa0", "src", "198.51.100.1")
	for _, a := range affinityEndpoints {
		serveOwnAddress(t, a+":8080")
	}
	d := openPlane(t, plane, IPv4)
	svc := func(affinity time.Duration, eps ...string) []Service {
		s := Service{Namespace: "default", Name: "web", VIPs: addrs("192.0.2.10"), Local: local, Affinity: affinity,
			Ports: []Port{{Name: "http", Protocol: TCP, Port: 80}}}
		for _, a := range eps {
			s.Endpoints = append(s.Endpoints, ep(a, true, "http/8080"))
		}
		return []Service{s}
	}
	sync := func(full bool, services []Service) {
		t.Helper()
		if _, err := d.Sync(services, full); err != nil {
			t.Fatal(err)
		}
	}
	sync(true, svc(time.Hour, affinityEndpoints...))
	first := stickyEndpoint(t, affinityClients[0], "with affinity")
	stickyEndpoint(t, affinityClients[1], "with affinity, another client")
	sync(true, svc(time.Hour, affinityEndpoints...))
	if got := stickyEndpoint(t, affinityClients[0], "after a full Sync"); got != first {
		t.Fatalf("after a full Sync the client moved from %s to %s", first, got)
	}

	rest := slices.DeleteFunc(slices.Clone(affinityEndpoints), func(a string) bool { return a == first })
	sync(false, svc(time.Hour, rest...))
	if got := stickyEndpoint(t, affinityClients[0], "its endpoint gone"); got == first {
		t.Fatalf("the client still reaches %s, which is gone", first)
	}

	sync(false, svc(0, affinityEndpoints...))
	if seen := reached(t, affinityClients[0], 20); len(seen) < 2 {
		t.Fatalf("affinity switched off: 20 connections all reached %v", seen)
	}
	sync(false, svc(time.Hour, affinityEndpoints...))
	stickyEndpoint(t, affinityClients[0], "affinity switched on again")
	if err := CleanupAll(Config{Family: IPv4, Backend: map[bool]string{true: "nft", false: plane}[plane == PlaneNFTables]}); err != nil {
		t.Fatal(err)
	}
}

// serveOwnAddress answers every connection to addr with the address it was made to.
func serveOwnAddress(t *testing.T, addr string) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(c.LocalAddr().(*net.TCPAddr).IP.String()))
			c.Close()
		}
	}()
}

// reached makes n new connections from client to the VIP and counts the endpoints answering.
func reached(t *testing.T, client string, n int) map[string]int {
	t.Helper()
	seen := map[string]int{}
	dialer := net.Dialer{Timeout: 2 * time.Second, LocalAddr: net.TCPAddrFromAddrPort(netip.AddrPortFrom(netip.MustParseAddr(client), 0))}
	for range n {
		c, err := dialer.Dial("tcp", "192.0.2.10:80")
		if err != nil {
			t.Fatalf("connect from %s: %v", client, err)
		}
		buf := make([]byte, 64)
		m, _ := c.Read(buf)
		c.Close()
		seen[string(buf[:m])]++
	}
	return seen
}

// stickyEndpoint checks that 20 new connections from client reach one endpoint, and names it.
func stickyEndpoint(t *testing.T, client, desc string) string {
	t.Helper()
	seen := reached(t, client, 20)
	if len(seen) != 1 {
		t.Fatalf("%s: 20 connections from %s reached %v, want one endpoint", desc, client, seen)
	}
	for a := range seen {
		return a
	}
	return ""
}
