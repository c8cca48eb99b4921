//go:build root

package l2

import (
	"net"
	"net/netip"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr/testr"

	"github.com/paas-org/vip-allocator-operator/internal/arpflood"
	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
)

// segment is a speaker namespace (this goroutine's) and a client namespace on
// one veth link: spk0 192.0.2.11/24 ↔ cli0 192.0.2.50/24.
type segment struct {
	t      *testing.T
	client string
	mac    string // spk0's MAC
}

func newSegment(t *testing.T) *segment { return newSegmentOf(t, false) }

// newSegment6 is newSegment with IPv6 too: spk0 2001:db8::11/64 ↔ cli0
// 2001:db8::50/64, duplicate address detection off (no tentative addresses
// to wait for, and NDP sockets can bind the link-local address at once).
func newSegment6(t *testing.T) *segment { return newSegmentOf(t, true) }

func newSegmentOf(t *testing.T, ipv6 bool) *segment {
	netnstest.EnterTest(t, "vipa-l2")
	s := &segment{t: t, client: netnstest.AddPeer(t, "vipa-l2c")}
	if ipv6 {
		netnstest.NoDAD(t, "")
		netnstest.NoDAD(t, s.client)
	}
	netnstest.Veth(t, "spk0", s.client, "cli0")
	s.run("ip", "addr", "add", "192.0.2.11/24", "dev", "spk0")
	s.inClient("ip", "addr", "add", "192.0.2.50/24", "dev", "cli0")
	if ipv6 {
		s.run("ip", "addr", "add", "2001:db8::11/64", "dev", "spk0")
		s.inClient("ip", "addr", "add", "2001:db8::50/64", "dev", "cli0")
		// NDP sockets bind the link-local addresses.
		netnstest.LinkLocal(t, "", "spk0")
		netnstest.LinkLocal(t, s.client, "cli0")
	}
	ifi, err := net.InterfaceByName("spk0")
	if err != nil {
		t.Fatal(err)
	}
	s.mac = ifi.HardwareAddr.String()
	return s
}

func (s *segment) run(args ...string) string {
	s.t.Helper()
	return netnstest.Run(s.t, args...)
}

func (s *segment) inClient(args ...string) string {
	s.t.Helper()
	return netnstest.RunIn(s.t, s.client, args...)
}

// arping asks for vip from the client and returns the MACs that answered.
func (s *segment) arping(vip string) string {
	out, _ := exec.Command("ip", "netns", "exec", s.client, "arping", "-c", "2", "-w", "3", "-I", "cli0", vip).CombinedOutput()
	return strings.ToLower(string(out))
}

func (s *segment) neigh(vip string) string {
	return strings.ToLower(s.inClient("ip", "neigh", "show", vip, "dev", "cli0"))
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if cond() {
			return
		}
	}
	t.Fatalf("timed out waiting: %s", what)
}

func TestSpeakerAnswersOnlyOwnedVIPs(t *testing.T) {
	s := newSegment(t)
	sp := NewSpeaker(testr.New(t), nil, 0)
	defer sp.Close()
	vip := netip.MustParseAddr("192.0.2.100")

	if out := s.arping("192.0.2.100"); strings.Contains(out, s.mac) {
		t.Fatalf("answered before owning the VIP:\n%s", out)
	}
	if err := sp.SetOwned(map[netip.Addr]string{vip: "spk0"}); err != nil {
		t.Fatal(err)
	}
	if out := s.arping("192.0.2.100"); !strings.Contains(out, "["+s.mac+"]") {
		t.Fatalf("owner did not answer ARP for the VIP:\n%s", out)
	}
	if out := s.arping("192.0.2.101"); strings.Contains(out, s.mac) {
		t.Fatalf("answered for a VIP it does not own:\n%s", out)
	}
	// The VIP is never put on an interface (no kernel answers, no DAD).
	if addrs := s.run("ip", "-o", "addr"); strings.Contains(addrs, "192.0.2.100") {
		t.Fatalf("VIP added to an interface:\n%s", addrs)
	}
	if err := sp.SetOwned(nil); err != nil {
		t.Fatal(err)
	}
	if out := s.arping("192.0.2.100"); strings.Contains(out, s.mac) {
		t.Fatalf("still answering after giving the VIP up:\n%s", out)
	}
}

func TestSpeakerGratuitousARPOnTakeover(t *testing.T) {
	s := newSegment(t)
	sp := NewSpeaker(testr.New(t), nil, 0)
	defer sp.Close()
	// The client still points the VIP at the previous owner.
	s.inClient("ip", "neigh", "replace", "192.0.2.100", "lladdr", "02:00:00:00:00:99", "dev", "cli0", "nud", "stale")
	if err := sp.SetOwned(map[netip.Addr]string{netip.MustParseAddr("192.0.2.100"): "spk0"}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "client's neighbour entry moves to the new owner", func() bool {
		return strings.Contains(s.neigh("192.0.2.100"), s.mac)
	})
	// Repeated for a while: a host that missed the first still gets one.
	s.inClient("ip", "neigh", "replace", "192.0.2.100", "lladdr", "02:00:00:00:00:99", "dev", "cli0", "nud", "stale")
	eventually(t, "a later gratuitous ARP moves it again", func() bool {
		return strings.Contains(s.neigh("192.0.2.100"), s.mac)
	})
}

// A VIP handed over is still answered for, but its gratuitous ARPs stop: they
// would pull clients back from the new owner. Owned again, it is announced.
func TestSpeakerHandedOverVIPIsAnsweredButNotAnnounced(t *testing.T) {
	s := newSegment(t)
	sp := NewSpeaker(testr.New(t), nil, 0)
	defer sp.Close()
	vip := netip.MustParseAddr("192.0.2.100")
	at := map[netip.Addr]string{vip: "spk0"}
	other := "02:00:00:00:00:99" // another node, as the client knows it
	s.inClient("ip", "neigh", "replace", "192.0.2.100", "lladdr", other, "dev", "cli0", "nud", "stale")
	if err := sp.SetOwned(at); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the takeover is announced", func() bool { return strings.Contains(s.neigh("192.0.2.100"), s.mac) })

	if err := sp.SetAnswering(nil, at); err != nil { // handed over, within the burst
		t.Fatal(err)
	}
	// The new owner announced itself.
	s.inClient("ip", "neigh", "replace", "192.0.2.100", "lladdr", other, "dev", "cli0", "nud", "stale")
	time.Sleep(2 * GARPInterval)
	if n := s.neigh("192.0.2.100"); !strings.Contains(n, other) {
		t.Fatalf("a gratuitous ARP after the hand-over pulled the client back: %s", n)
	}
	if out := s.arping("192.0.2.100"); !strings.Contains(out, "["+s.mac+"]") {
		t.Fatalf("no answer while handing over:\n%s", out)
	}

	if err := sp.SetAnswering(at, nil); err != nil { // owned again
		t.Fatal(err)
	}
	s.inClient("ip", "neigh", "replace", "192.0.2.100", "lladdr", other, "dev", "cli0", "nud", "stale")
	eventually(t, "owned again, it is announced again", func() bool { return strings.Contains(s.neigh("192.0.2.100"), s.mac) })
}

func TestSpeakerReportsForeignClaims(t *testing.T) {
	s := newSegment(t)
	vip := netip.MustParseAddr("192.0.2.100")
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

	// A second announcer sends gratuitous ARP for our VIP (no probing here,
	// so only the gratuitous ARP can be what is heard).
	heard := NewSpeaker(testr.New(t), known, 0)
	if err := heard.SetOwned(owned); err != nil {
		t.Fatal(err)
	}
	s.inClient("ip", "link", "set", "cli0", "address", "02:00:00:00:00:bb")
	s.inClient("ip", "addr", "add", "192.0.2.100/32", "dev", "cli0")
	s.inClient("arping", "-U", "-c", "1", "-I", "cli0", "192.0.2.100")
	expect(heard, "02:00:00:00:00:bb", "gratuitous ARP from a foreign MAC")

	// A MAC of our own nodes (a hand-over in progress) is no conflict.
	s.inClient("ip", "link", "set", "cli0", "address", "02:00:00:00:00:aa")
	s.inClient("arping", "-U", "-c", "1", "-I", "cli0", "192.0.2.100")
	select {
	case c := <-heard.Conflicts():
		t.Fatalf("own node's MAC reported as a conflict: %+v", c)
	case <-time.After(time.Second):
	}
	heard.Close()

	// A quiet host configured with the address answers the owner's probe.
	s.inClient("ip", "link", "set", "cli0", "address", "02:00:00:00:00:cc")
	probing := NewSpeaker(testr.New(t), known, 200*time.Millisecond)
	defer probing.Close()
	if err := probing.SetOwned(owned); err != nil {
		t.Fatal(err)
	}
	expect(probing, "02:00:00:00:00:cc", "a host holding the VIP, found by probing")
}

// A neighbour floods forged claims of an owned VIP from random MACs: the
// speaker keeps answering the client, and looks at (asks ours about, reports)
// no more claims than the gate's limits allow.
func TestSpeakerUnderClaimFlood(t *testing.T) {
	s := newSegment(t)
	vip := netip.MustParseAddr("192.0.2.100")
	var looked atomic.Int64
	sp := NewSpeaker(testr.New(t), func(net.HardwareAddr) bool { looked.Add(1); return false }, 0)
	defer sp.Close()
	if err := sp.SetOwned(map[netip.Addr]string{vip: "spk0"}); err != nil {
		t.Fatal(err)
	}
	go func() { // a slow reader of the conflicts: the speaker must not care
		for range sp.Conflicts() {
		}
	}()
	sender, err := arpflood.Dial(s.client, "cli0")
	if err != nil {
		t.Fatal(err)
	}
	defer sender.Close()
	mac, _ := net.ParseMAC(s.mac)
	const flood = 3 * time.Second
	start := time.Now()
	sent := make(chan int, 1)
	go func() {
		n, err := sender.Flood(vip, netip.MustParseAddr("192.0.2.11"), mac, 5000, flood)
		if err != nil {
			t.Error(err)
		}
		sent <- n
	}()
	answered, asked := 0, 0
	for time.Since(start) < flood {
		asked++
		if strings.Contains(s.arping(vip.String()), s.mac) {
			answered++
		}
	}
	n := <-sent
	elapsed := time.Since(start)
	t.Logf("%d claims in %s; %d looked at, %d ignored; the client's ARP answered %d of %d times", n, elapsed.Round(time.Millisecond), looked.Load(), sp.ClaimsIgnored(), answered, asked)
	if answered != asked {
		t.Errorf("the VIP answered %d of %d ARP requests under the flood", answered, asked)
	}
	if most := int64(claimsPerVIPBurst + claimsPerVIPPerSecond*(int(elapsed.Seconds())+1)); looked.Load() > most {
		t.Errorf("%d claims looked at, want at most %d", looked.Load(), most)
	}
	if ignored := sp.ClaimsIgnored(); ignored < uint64(n)/2 {
		t.Errorf("%d of %d claims ignored: the flood did not reach the speaker", ignored, n)
	}
}
