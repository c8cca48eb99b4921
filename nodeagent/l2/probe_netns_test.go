//go:build root

package l2

import (
	"context"
	"net"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
)

// A host using the address answers the probe, over ARP and over NDP; an
// address nobody uses meets silence; the probe itself moves no host's entry.
func TestProbeARPHearsAHostUsingTheAddress(t *testing.T) {
	probeHearsAHostUsingTheAddress(t, "192.0.2.100", "192.0.2.101", "/32")
}

func TestProbeNDPHearsAHostUsingTheAddress(t *testing.T) {
	probeHearsAHostUsingTheAddress(t, "2001:db8::100", "2001:db8::101", "/128")
}

func probeHearsAHostUsingTheAddress(t *testing.T, used, free, plen string) {
	s := newSegment6(t)
	s.inClient("ip", "link", "set", "cli0", "address", "02:00:00:00:00:cc")
	s.inClient("ip", "addr", "add", used+plen, "dev", "cli0", "nodad")
	sp := NewSpeaker(testr.New(t), nil, 0)
	defer sp.Close()
	usedIP, freeIP := netip.MustParseAddr(used), netip.MustParseAddr(free)

	start := time.Now()
	heard, err := sp.Probe(context.Background(), map[netip.Addr]string{usedIP: "spk0", freeIP: "spk0"}, 3, 300*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	took := time.Since(start)
	if got := heard[usedIP].String(); got != "02:00:00:00:00:cc" {
		t.Fatalf("probe of %s, used by the client: heard %v, want the client's 02:00:00:00:00:cc", usedIP, heard)
	}
	if mac, ok := heard[freeIP]; ok {
		t.Fatalf("probe of %s, which nobody uses: heard %s", freeIP, mac)
	}
	if took < 800*time.Millisecond || took > 2*time.Second {
		t.Fatalf("probe took %s, want about 3 tries of 300 ms", took)
	}
	// Probing claims nothing: the client learnt no entry for either.
	for _, vip := range []string{free, used} {
		if n := strings.TrimSpace(s.inClient("ip", "neigh", "show", vip, "dev", "cli0")); n != "" {
			t.Fatalf("the probe gave the client a neighbour entry for %s: %q", vip, n)
		}
	}
	// Nor is the probed address answered afterwards.
	if strings.Contains(s.arping("192.0.2.101"), s.mac) {
		t.Fatal("the speaker answers for a probed address it does not own")
	}
}

// A claim by one of the cluster's own nodes (a VIP another node announces) is
// not a host using the address.
func TestProbeIgnoresOwnNodes(t *testing.T) {
	s := newSegment(t)
	s.inClient("ip", "link", "set", "cli0", "address", "02:00:00:00:00:aa")
	s.inClient("ip", "addr", "add", "192.0.2.100/32", "dev", "cli0")
	known := func(mac net.HardwareAddr) bool { return mac.String() == "02:00:00:00:00:aa" }
	sp := NewSpeaker(testr.New(t), known, 0)
	defer sp.Close()
	heard, err := sp.Probe(context.Background(), map[netip.Addr]string{netip.MustParseAddr("192.0.2.100"): "spk0"}, 2, 200*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	if len(heard) != 0 {
		t.Fatalf("a cluster node's claim taken for a host on the LAN: %v", heard)
	}
}
