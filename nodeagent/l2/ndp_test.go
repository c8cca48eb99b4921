package l2

import (
	"net"
	"net/netip"
	"testing"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/bpf"
)

var (
	vip6      = netip.MustParseAddr("2001:db8::100")
	clientIP6 = netip.MustParseAddr("2001:db8::50")
	ourMAC    = net.HardwareAddr{0x02, 0, 0, 0, 0, 0x11}
	otherMAC  = net.HardwareAddr{0x02, 0, 0, 0, 0, 0xbb}
)

func lla(dir ndp.Direction, mac net.HardwareAddr) ndp.Option {
	return &ndp.LinkLayerAddress{Direction: dir, Addr: mac}
}

func TestInterpretNDP(t *testing.T) {
	cases := []struct {
		desc     string
		m        ndp.Message
		src      netip.Addr
		hopLimit int
		ignored  bool
		asked    netip.Addr
		claimed  netip.Addr
		claimer  net.HardwareAddr
	}{
		{desc: "a client resolving the VIP asks for it, and claims only its own address",
			m:   &ndp.NeighborSolicitation{TargetAddress: vip6, Options: []ndp.Option{lla(ndp.Source, otherMAC)}},
			src: clientIP6.WithZone("spk0"), hopLimit: 255, asked: vip6, claimed: clientIP6, claimer: otherMAC},
		{desc: "a duplicate address detection probe asks and claims nothing",
			m:   &ndp.NeighborSolicitation{TargetAddress: vip6},
			src: netip.IPv6Unspecified().WithZone("spk0"), hopLimit: 255, asked: vip6},
		{desc: "a host using the VIP solicits from it: a claim",
			m:   &ndp.NeighborSolicitation{TargetAddress: clientIP6, Options: []ndp.Option{lla(ndp.Source, otherMAC)}},
			src: vip6, hopLimit: 255, asked: clientIP6, claimed: vip6, claimer: otherMAC},
		{desc: "an advertisement claims its target for its target link-layer address",
			m:   &ndp.NeighborAdvertisement{Override: true, TargetAddress: vip6, Options: []ndp.Option{lla(ndp.Target, otherMAC)}},
			src: netip.MustParseAddr("fe80::bb%spk0"), hopLimit: 255, claimed: vip6, claimer: otherMAC},
		{desc: "an advertisement without a MAC says nothing we can check",
			m:   &ndp.NeighborAdvertisement{TargetAddress: vip6},
			src: netip.MustParseAddr("fe80::bb"), hopLimit: 255, ignored: true},
		{desc: "a message forwarded from off the link is ignored",
			m:   &ndp.NeighborAdvertisement{Override: true, TargetAddress: vip6, Options: []ndp.Option{lla(ndp.Target, otherMAC)}},
			src: netip.MustParseAddr("2001:db8:1::1"), hopLimit: 64, ignored: true},
		{desc: "router messages are none of our business",
			m:   &ndp.RouterSolicitation{},
			src: netip.MustParseAddr("fe80::bb"), hopLimit: 255, ignored: true},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			h, ok := interpretNDP(c.m, c.src, c.hopLimit)
			if ok == c.ignored {
				t.Fatalf("ok = %v, want %v", ok, !c.ignored)
			}
			if h.asked != c.asked || h.claimed != c.claimed || h.claimer.String() != c.claimer.String() {
				t.Fatalf("heard asked=%v claimed=%v by %v, want asked=%v claimed=%v by %v", h.asked, h.claimed, h.claimer, c.asked, c.claimed, c.claimer)
			}
		})
	}
}

// flags of a marshalled Neighbor Advertisement: R, S and O are the top three
// bits of the byte after the ICMPv6 header (RFC 4861 4.4).
func naFlags(t *testing.T, na *ndp.NeighborAdvertisement) (router, solicited, override bool) {
	t.Helper()
	b, err := ndp.MarshalMessage(na)
	if err != nil {
		t.Fatal(err)
	}
	if b[0] != 136 {
		t.Fatalf("ICMPv6 type %d, want 136 (Neighbor Advertisement)", b[0])
	}
	return b[4]&0x80 != 0, b[4]&0x40 != 0, b[4]&0x20 != 0
}

func TestAdvertisementAnswersTheAsker(t *testing.T) {
	na, dst := advertisement(vip6, clientIP6, ourMAC)
	if dst != clientIP6 {
		t.Fatalf("sent to %s, want the asker %s", dst, clientIP6)
	}
	if r, s, o := naFlags(t, na); r || !s || !o {
		t.Fatalf("flags router=%v solicited=%v override=%v, want solicited and override only", r, s, o)
	}
	if na.TargetAddress != vip6 {
		t.Fatalf("target %s, want %s", na.TargetAddress, vip6)
	}
	if mac, ok := linkLayerAddress(na.Options, ndp.Target); !ok || mac.String() != ourMAC.String() {
		t.Fatalf("target link-layer address %v, want %v", mac, ourMAC)
	}
}

func TestAdvertisementDefendsAgainstDAD(t *testing.T) {
	na, dst := advertisement(vip6, netip.IPv6Unspecified(), ourMAC)
	if dst != netip.IPv6LinkLocalAllNodes() {
		t.Fatalf("sent to %s, want all nodes (ff02::1): a DAD probe has no address to answer to", dst)
	}
	if r, s, o := naFlags(t, na); r || s || !o {
		t.Fatalf("flags router=%v solicited=%v override=%v, want override only", r, s, o)
	}
}

func TestUnsolicitedOverrides(t *testing.T) {
	na := unsolicited(vip6, ourMAC)
	if r, s, o := naFlags(t, na); r || s || !o {
		t.Fatalf("flags router=%v solicited=%v override=%v, want override only", r, s, o)
	}
	if mac, ok := linkLayerAddress(na.Options, ndp.Target); !ok || mac.String() != ourMAC.String() {
		t.Fatalf("target link-layer address %v, want %v", mac, ourMAC)
	}
}

func TestSolicitationGoesToTheSolicitedNodeGroup(t *testing.T) {
	ns, dst, err := solicitation(vip6, ourMAC)
	if err != nil {
		t.Fatal(err)
	}
	if want := netip.MustParseAddr("ff02::1:ff00:100"); dst != want {
		t.Fatalf("sent to %s, want %s", dst, want)
	}
	if ns.TargetAddress != vip6 {
		t.Fatalf("target %s", ns.TargetAddress)
	}
	if mac, ok := linkLayerAddress(ns.Options, ndp.Source); !ok || mac.String() != ourMAC.String() {
		t.Fatalf("source link-layer address %v, want %v", mac, ourMAC)
	}
}

func TestGroupsJoinOnceLeaveWithTheLastVIP(t *testing.T) {
	g := groups{}
	a, b := netip.MustParseAddr("2001:db8::1:100"), netip.MustParseAddr("2001:db8:1::1:100") // same last 24 bits
	c := netip.MustParseAddr("2001:db8::200")
	want := netip.MustParseAddr("ff02::1:ff01:100")
	if group, join, err := g.add(a); err != nil || !join || group != want {
		t.Fatalf("first VIP: group %s join %v err %v, want to join %s", group, join, err, want)
	}
	if _, join, _ := g.add(b); join {
		t.Fatal("second VIP of the same group joined again (the kernel refuses a second join)")
	}
	if _, join, _ := g.add(c); !join {
		t.Fatal("a VIP of another group did not join it")
	}
	if _, leave := g.remove(a); leave {
		t.Fatal("left the group while another owned VIP still needs it")
	}
	if group, leave := g.remove(b); !leave || group != want {
		t.Fatalf("last VIP of the group: leave %v group %s, want to leave %s", leave, group, want)
	}
	if _, leave := g.remove(b); leave {
		t.Fatal("removing a VIP not counted left a group")
	}
}

// ipv6Packet is an IPv6 header (no extension headers) with payload.
func ipv6Packet(src, dst netip.Addr, hopLimit byte, nextHeader byte, payload []byte) []byte {
	b := make([]byte, 40, 40+len(payload))
	b[0] = 0x60
	b[4], b[5] = byte(len(payload)>>8), byte(len(payload))
	b[6], b[7] = nextHeader, hopLimit
	s, d := src.As16(), dst.As16()
	copy(b[8:24], s[:])
	copy(b[24:40], d[:])
	return append(b, payload...)
}

func TestUnicastSolicitations(t *testing.T) {
	vm, err := func() (*bpf.VM, error) {
		prog, ok := bpf.Disassemble(unicastSolicitations)
		if !ok {
			t.Fatal("filter does not disassemble")
		}
		return bpf.NewVM(prog)
	}()
	if err != nil {
		t.Fatal(err)
	}
	marshal := func(m ndp.Message) []byte {
		b, err := ndp.MarshalMessage(m)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	ns := marshal(&ndp.NeighborSolicitation{TargetAddress: vip6, Options: []ndp.Option{lla(ndp.Source, otherMAC)}})
	group, _ := ndp.SolicitedNodeMulticast(vip6)
	for _, c := range []struct {
		desc   string
		packet []byte
		pass   bool       // through the kernel filter
		asked  netip.Addr // as read, had it passed
	}{
		{"a solicitation to the VIP itself", ipv6Packet(clientIP6, vip6, 255, 58, ns), true, vip6},
		{"a solicitation to the solicited-node group (the ICMPv6 socket's)", ipv6Packet(clientIP6, group, 255, 58, ns), false, vip6},
		{"an advertisement", ipv6Packet(clientIP6, vip6, 255, 58, marshal(unsolicited(vip6, otherMAC))), false, netip.Addr{}},
		{"not ICMPv6", ipv6Packet(clientIP6, vip6, 255, 17, ns), false, netip.Addr{}},
		{"a solicitation forwarded from off the link", ipv6Packet(clientIP6, vip6, 254, 58, ns), true, netip.Addr{}},
		{"truncated", ipv6Packet(clientIP6, vip6, 255, 58, ns)[:44], true, netip.Addr{}},
	} {
		t.Run(c.desc, func(t *testing.T) {
			n, err := vm.Run(c.packet)
			if err != nil {
				t.Fatal(err)
			}
			if (n > 0) != c.pass {
				t.Fatalf("filter keeps %d bytes, want pass=%v", n, c.pass)
			}
			h, ok := unicastSolicitation(c.packet)
			if ok != c.asked.IsValid() || h.asked != c.asked {
				t.Fatalf("read asked=%v ok=%v, want %v", h.asked, ok, c.asked)
			}
			if ok && (h.packet != clientIP6 || h.claimer.String() != otherMAC.String()) {
				t.Fatalf("answer goes to %v, asker's MAC %v; want %s, %s", h.packet, h.claimer, clientIP6, otherMAC)
			}
		})
	}
}
