//go:build root

package l2

import (
	"net"
	"net/netip"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"
	"github.com/mdlayher/ndp"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
)

// solicit asks for vip from the client as any host resolving it does (a
// Neighbor Solicitation to its solicited-node group) and returns the MACs of
// every answer (solicited advertisement) for it heard within 700 ms.
func (s *segment) solicit(vip string) []string {
	s.t.Helper()
	group, err := ndp.SolicitedNodeMulticast(netip.MustParseAddr(vip))
	if err != nil {
		s.t.Fatal(err)
	}
	return s.solicitAt(vip, group)
}

// solicitAt is solicit with the solicitation sent to dst: the VIP itself is
// how a host that knows the VIP's MAC checks it is still reachable.
func (s *segment) solicitAt(vip string, dst netip.Addr) []string {
	s.t.Helper()
	target := netip.MustParseAddr(vip)
	var macs []string
	err := netnstest.Do(s.client, func() error {
		ifi, err := net.InterfaceByName("cli0")
		if err != nil {
			return err
		}
		c, _, err := ndp.Listen(ifi, ndp.LinkLocal)
		if err != nil {
			return err
		}
		defer c.Close()
		ns, _, err := solicitation(target, ifi.HardwareAddr)
		if err != nil {
			return err
		}
		if err := c.WriteTo(ns, nil, dst); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(700 * time.Millisecond))
		for {
			m, _, _, err := c.ReadFrom()
			if err != nil {
				return nil // the deadline: done listening
			}
			if na, ok := m.(*ndp.NeighborAdvertisement); ok && na.Solicited && na.TargetAddress == target {
				mac, _ := linkLayerAddress(na.Options, ndp.Target)
				macs = append(macs, mac.String())
			}
		}
	})
	if err != nil {
		s.t.Fatal(err)
	}
	return macs
}

func TestNDPv6SpeakerAnswersOnlyOwnedVIPs(t *testing.T) {
	s := newSegment6(t)
	sp := NewSpeaker(testr.New(t), nil, 0)
	defer sp.Close()
	vip := netip.MustParseAddr("2001:db8::100")

	if macs := (s.solicit("2001:db8::100")); len(macs) != 0 {
		t.Fatalf("answered before owning the VIP: %v", macs)
	}
	if err := sp.SetOwned(map[netip.Addr]string{vip: "spk0"}); err != nil {
		t.Fatal(err)
	}
	// Solicitations reach us through the VIP's solicited-node group.
	if maddr := s.run("ip", "-6", "maddr", "show", "dev", "spk0"); !strings.Contains(maddr, "ff02::1:ff00:100") {
		t.Fatalf("solicited-node group of the VIP not joined:\n%s", maddr)
	}
	if macs := s.solicit("2001:db8::100"); len(macs) != 1 || macs[0] != s.mac {
		t.Fatalf("answers %v, want exactly the owner's %s", macs, s.mac)
	}
	// The client's kernel resolves through the same answer (the connection
	// itself fails: nothing listens behind the VIP here).
	_ = exec.Command("ip", "netns", "exec", s.client, "curl", "-s", "--connect-timeout", "1", "http://[2001:db8::100]/").Run()
	if n := s.neigh("2001:db8::100"); !strings.Contains(n, "lladdr "+s.mac) {
		t.Fatalf("client's neighbour entry: %q, want the owner's MAC %s", n, s.mac)
	}
	if macs := (s.solicit("2001:db8::101")); len(macs) != 0 {
		t.Fatalf("answered for a VIP it does not own: %v", macs)
	}
	// Never on an interface: no kernel answers, no duplicate address detection.
	if addrs := s.run("ip", "-o", "addr"); strings.Contains(addrs, "2001:db8::100") {
		t.Fatalf("VIP added to an interface:\n%s", addrs)
	}
	if err := sp.SetOwned(nil); err != nil {
		t.Fatal(err)
	}
	if macs := (s.solicit("2001:db8::100")); len(macs) != 0 {
		t.Fatalf("still answering after giving the VIP up: %v", macs)
	}
}

// A host that knows the VIP's MAC checks it with solicitations sent to the
// VIP itself (unicast to the owner's MAC), which no ICMPv6 socket receives.
func TestNDPv6AnswersUnicastSolicitations(t *testing.T) {
	s := newSegment6(t)
	sp := NewSpeaker(testr.New(t), nil, 0)
	defer sp.Close()
	vip := netip.MustParseAddr("2001:db8::100")
	if err := sp.SetOwned(map[netip.Addr]string{vip: "spk0"}); err != nil {
		t.Fatal(err)
	}
	// The client's kernel resolves the VIP, so its unicast goes to the owner's MAC.
	_ = exec.Command("ip", "netns", "exec", s.client, "curl", "-s", "--connect-timeout", "1", "http://[2001:db8::100]/").Run()
	if n := s.neigh("2001:db8::100"); !strings.Contains(n, "lladdr "+s.mac) {
		t.Fatalf("client's neighbour entry: %q, want the owner's MAC %s", n, s.mac)
	}
	if macs := s.solicitAt("2001:db8::100", vip); len(macs) != 1 || macs[0] != s.mac {
		t.Fatalf("answers to a solicitation sent to the VIP: %v, want exactly the owner's %s", macs, s.mac)
	}
	// The kernel's own check of the entry: STALE, used, DELAY for 5 s, then
	// PROBE by unicast solicitations 1 s apart. Answered, it turns REACHABLE
	// at once; unanswered, it would probe for 3 s and fail.
	s.inClient("ip", "-6", "neigh", "change", "2001:db8::100", "dev", "cli0", "nud", "stale")
	go func() {
		_ = exec.Command("ip", "netns", "exec", s.client, "bash", "-c",
			"for i in $(seq 90); do echo x > /dev/udp/2001:db8::100/9; sleep 0.1; done").Run()
	}()
	var probing time.Duration
	var states []string
	for deadline := time.Now().Add(9 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		f := strings.Fields(s.neigh("2001:db8::100"))
		if len(f) == 0 {
			continue
		}
		state := f[len(f)-1]
		if state == "probe" {
			probing += 50 * time.Millisecond
		}
		if len(states) == 0 || states[len(states)-1] != state {
			states = append(states, state)
		}
	}
	if states[len(states)-1] != "reachable" || slices.Contains(states, "failed") || slices.Contains(states, "incomplete") || probing >= time.Second {
		t.Fatalf("client's entry went %v, probing for %s; want it reachable again after at most one unicast probe", states, probing)
	}
}

func TestNDPv6SharedSolicitedNodeGroup(t *testing.T) {
	s := newSegment6(t)
	sp := NewSpeaker(testr.New(t), nil, 0)
	defer sp.Close()
	// Same last 24 bits: one solicited-node group for both.
	a, b := netip.MustParseAddr("2001:db8::100"), netip.MustParseAddr("2001:db8::1:0:100")
	if err := sp.SetOwned(map[netip.Addr]string{a: "spk0", b: "spk0"}); err != nil {
		t.Fatal(err)
	}
	if err := sp.SetOwned(map[netip.Addr]string{b: "spk0"}); err != nil {
		t.Fatal(err)
	}
	if macs := (s.solicit(b.String())); len(macs) != 1 || macs[0] != s.mac {
		t.Fatalf("after giving up %s, %s (same group) is answered by %v, want %s", a, b, macs, s.mac)
	}
	if err := sp.SetOwned(nil); err != nil {
		t.Fatal(err)
	}
	if maddr := s.run("ip", "-6", "maddr", "show", "dev", "spk0"); strings.Contains(maddr, "ff02::1:ff00:100") {
		t.Fatalf("solicited-node group still joined with no VIP owned:\n%s", maddr)
	}
}

func TestNDPv6UnsolicitedAdvertisementOnTakeover(t *testing.T) {
	s := newSegment6(t)
	sp := NewSpeaker(testr.New(t), nil, 0)
	defer sp.Close()
	// The client still points the VIP at the previous owner.
	s.inClient("ip", "-6", "neigh", "replace", "2001:db8::100", "lladdr", "02:00:00:00:00:99", "dev", "cli0", "nud", "stale")
	if err := sp.SetOwned(map[netip.Addr]string{netip.MustParseAddr("2001:db8::100"): "spk0"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "client's neighbour entry moves to the new owner", func() bool {
		return strings.Contains(s.neigh("2001:db8::100"), s.mac)
	})
	// Repeated for a while: a host that missed the first still gets one.
	s.inClient("ip", "-6", "neigh", "replace", "2001:db8::100", "lladdr", "02:00:00:00:00:99", "dev", "cli0", "nud", "stale")
	eventually(t, "a later advertisement moves it again", func() bool {
		return strings.Contains(s.neigh("2001:db8::100"), s.mac)
	})
}

func TestNDPv6SpeakerReportsForeignClaims(t *testing.T) {
	s := newSegment6(t)
	vip := netip.MustParseAddr("2001:db8::100")
	owned := map[netip.Addr]string{vip: "spk0"}
	known := func(mac net.HardwareAddr) bool { return mac.String() == "02:00:00:00:00:aa" }
	expect := func(sp *Speaker, mac, what string) {
		t.Helper()
		select {
		case c := <-sp.Conflicts():
			if c.VIP != vip || c.MAC.String() != mac || c.Interface != "spk0" {
				t.Fatalf("%s: conflict = %+v, want %s from %s on spk0", what, c, vip, mac)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: not reported", what)
		}
	}
	// A second announcer on the client's side advertises the VIP as its own.
	claim := func(mac string) {
		t.Helper()
		hw, _ := net.ParseMAC(mac)
		if err := netnstest.Do(s.client, func() error {
			ifi, err := net.InterfaceByName("cli0")
			if err != nil {
				return err
			}
			// The link-local address may still be settling on a loaded machine
			// (bind: cannot assign requested address): try for a while.
			var c *ndp.Conn
			for deadline := time.Now().Add(3 * time.Second); ; time.Sleep(50 * time.Millisecond) {
				if c, _, err = ndp.Listen(ifi, ndp.LinkLocal); err == nil || time.Now().After(deadline) {
					break
				}
			}
			if err != nil {
				return err
			}
			defer c.Close()
			return c.WriteTo(unsolicited(vip, hw), nil, netip.IPv6LinkLocalAllNodes())
		}); err != nil {
			t.Fatal(err)
		}
	}

	heard := NewSpeaker(testr.New(t), known, 0)
	if err := heard.SetOwned(owned); err != nil {
		t.Fatal(err)
	}
	claim("02:00:00:00:00:bb")
	expect(heard, "02:00:00:00:00:bb", "unsolicited advertisement from a foreign MAC")

	// A MAC of our own nodes (a hand-over in progress) is no conflict.
	claim("02:00:00:00:00:aa")
	select {
	case c := <-heard.Conflicts():
		t.Fatalf("own node's MAC reported as a conflict: %+v", c)
	case <-time.After(time.Second):
	}
	heard.Close()

	// A quiet host configured with the address answers the owner's probe
	// (its kernel answers the solicitation).
	s.inClient("ip", "link", "set", "cli0", "address", "02:00:00:00:00:cc")
	s.inClient("ip", "addr", "add", "2001:db8::100/128", "dev", "cli0", "nodad")
	probing := NewSpeaker(testr.New(t), known, 200*time.Millisecond)
	defer probing.Close()
	if err := probing.SetOwned(owned); err != nil {
		t.Fatal(err)
	}
	expect(probing, "02:00:00:00:00:cc", "a host holding the VIP, found by probing")
}
