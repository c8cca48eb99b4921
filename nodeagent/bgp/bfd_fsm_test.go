package bgp

import (
	"testing"
	"time"

	"github.com/osrg/gobgp/v4/pkg/packet/bfd"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// routerPacket is a packet of the router's session mine, to this node's
// session yours (0: it does not know it), at 300 ms x 3 unless changed.
func routerPacket(state bfd.StateType, mine, yours uint32) *bfd.BFDHeader {
	return &bfd.BFDHeader{Version: 1, State: state, DetectTimeMultiplier: 3, MyDiscriminator: mine, YourDiscriminator: yours,
		DesiredMinTxInterval: 300000, RequiredMinRxInterval: 300000}
}

// TestBFDFSMFollowsTheRouter walks one session through what FRR does with a
// dynamic neighbour: its BFD session comes up, FRR replaces it (a new
// discriminator, Down, not knowing this node's) when the BGP session comes
// up, and this session follows the new one without declaring the path down.
func TestBFDFSMFollowsTheRouter(t *testing.T) {
	const local, x, y, z = 0x1001, 0xa, 0xb, 0xc
	cfg := BFD{Receive: 300 * time.Millisecond, Transmit: 300 * time.Millisecond, Multiplier: 3}
	f := newBFDFSM(cfg, local)
	now := time.Now()
	steps := []struct {
		desc string
		in   *bfd.BFDHeader
		want bfdRx
		// the state after, and the Your Discriminator this node sends then
		state string
		yours uint32
	}{
		{"the router's first session, Down: Init", routerPacket(bfd.StateDown, x, 0),
			bfdRx{accepted: true, changed: true}, paasv1.BFDInit, x},
		{"it answers Init: Up", routerPacket(bfd.StateInit, x, local),
			bfdRx{accepted: true, changed: true}, paasv1.BFDUp, x},
		{"it is Up and polls (faster timers): Final", func() *bfd.BFDHeader { h := routerPacket(bfd.StateUp, x, local); h.Poll = true; return h }(),
			bfdRx{accepted: true, final: true}, paasv1.BFDUp, x},
		{"the router replaced its session (BGP came up): follow the new one, no reset", routerPacket(bfd.StateDown, y, 0),
			bfdRx{accepted: true, changed: true, rebound: true}, paasv1.BFDInit, y},
		{"the old one's last packet: discarded", routerPacket(bfd.StateUp, x, local),
			bfdRx{accepted: false}, paasv1.BFDInit, y},
		{"the new one answers: Up", routerPacket(bfd.StateInit, y, local),
			bfdRx{accepted: true, changed: true}, paasv1.BFDUp, y},
		{"replaced again while this one was in Init with it: follows again", routerPacket(bfd.StateDown, z, 0),
			bfdRx{accepted: true, changed: true, rebound: true}, paasv1.BFDInit, z},
		{"a second Down of the new one: still Init", routerPacket(bfd.StateDown, z, 0),
			bfdRx{accepted: true}, paasv1.BFDInit, z},
		{"Up", routerPacket(bfd.StateUp, z, local),
			bfdRx{accepted: true, changed: true}, paasv1.BFDUp, z},
		{"a packet for another session of this node: discarded", routerPacket(bfd.StateDown, z, 0x999),
			bfdRx{}, paasv1.BFDUp, z},
		{"Up without Your Discriminator: discarded (RFC 5880)", routerPacket(bfd.StateUp, z, 0),
			bfdRx{}, paasv1.BFDUp, z},
		{"no multiplier: discarded", func() *bfd.BFDHeader { h := routerPacket(bfd.StateUp, z, local); h.DetectTimeMultiplier = 0; return h }(),
			bfdRx{}, paasv1.BFDUp, z},
		{"the same session signals Down: the path is down, reset", routerPacket(bfd.StateDown, z, local),
			bfdRx{accepted: true, changed: true, down: bfdSignalled}, paasv1.BFDDown, z},
		{"it comes back", routerPacket(bfd.StateInit, z, local),
			bfdRx{accepted: true, changed: true}, paasv1.BFDUp, z},
		{"the router takes BFD administratively down: Down, no reset", routerPacket(bfd.StateAdminDown, z, local),
			bfdRx{accepted: true, changed: true, adminDown: true}, paasv1.BFDDown, z},
	}
	for i, st := range steps {
		got := f.receive(st.in, now.Add(time.Duration(i)*100*time.Millisecond))
		if got != st.want {
			t.Errorf("%s: %+v, want %+v", st.desc, got, st.want)
		}
		if f.stateName() != st.state || f.packet(false).YourDiscriminator != st.yours {
			t.Errorf("%s: state %s, sends Your Discriminator %#x; want %s, %#x", st.desc, f.stateName(), f.packet(false).YourDiscriminator, st.state, st.yours)
		}
		if p := f.packet(false); p.MyDiscriminator != local || p.DetectTimeMultiplier != 3 || p.DesiredMinTxInterval != 300000 || p.RequiredMinRxInterval != 300000 {
			t.Errorf("%s: sends %+v", st.desc, p)
		}
	}
}

func TestBFDFSMExpiry(t *testing.T) {
	cfg := BFD{Receive: 300 * time.Millisecond, Transmit: 250 * time.Millisecond, Multiplier: 3}
	now := time.Now()
	up := func() *bfdFSM {
		f := newBFDFSM(cfg, 1)
		f.receive(routerPacket(bfd.StateDown, 7, 0), now)
		f.receive(routerPacket(bfd.StateUp, 7, 1), now)
		return f
	}
	f := up()
	if d := f.detectTime(); d != 900*time.Millisecond {
		t.Errorf("detection time %s, want 900ms (the router's x3 times the 300 ms this node asks for)", d)
	}
	if why := f.expire(now.Add(899 * time.Millisecond)); why != "" || f.stateName() != paasv1.BFDUp {
		t.Errorf("within the detection time: %q, %s", why, f.stateName())
	}
	if why := f.expire(now.Add(900 * time.Millisecond)); why != bfdExpired || f.stateName() != paasv1.BFDDown || f.packet(false).YourDiscriminator != 0 {
		t.Errorf("past it: %q, %s, Your Discriminator %d; want %q, Down, 0", why, f.stateName(), f.packet(false).YourDiscriminator, bfdExpired)
	}
	if why := f.expire(now.Add(time.Hour)); why != "" {
		t.Errorf("Down expires again: %q", why)
	}
	// Init protected nothing yet: back to Down, no reset.
	f = newBFDFSM(cfg, 1)
	f.receive(routerPacket(bfd.StateDown, 7, 0), now)
	if why := f.expire(now.Add(time.Second)); why != "" || f.stateName() != paasv1.BFDDown {
		t.Errorf("Init expired: %q, %s; want no reset, Down", why, f.stateName())
	}
	// A router sending slower than this node asks for: its rate counts.
	f = up()
	slow := routerPacket(bfd.StateUp, 7, 1)
	slow.DesiredMinTxInterval, slow.DetectTimeMultiplier = 1000000, 5
	f.receive(slow, now)
	if d := f.detectTime(); d != 5*time.Second {
		t.Errorf("detection time %s, want 5s", d)
	}
}

func TestBFDFSMTxInterval(t *testing.T) {
	cfg := BFD{Receive: 300 * time.Millisecond, Transmit: 250 * time.Millisecond, Multiplier: 3}
	f := newBFDFSM(cfg, 1)
	if d := f.txInterval(); d != 250*time.Millisecond {
		t.Errorf("before hearing the router: %s, want this node's 250ms", d)
	}
	f.receive(routerPacket(bfd.StateDown, 7, 0), time.Now())
	if d := f.txInterval(); d != 300*time.Millisecond {
		t.Errorf("the router wants 300 ms: %s", d)
	}
	none := routerPacket(bfd.StateDown, 7, 0)
	none.RequiredMinRxInterval = 0
	f.receive(none, time.Now())
	if d := f.txInterval(); d != 0 {
		t.Errorf("the router wants no packets: %s, want 0", d)
	}
	for range 1000 {
		if d := jitter(time.Second, 3); d < 750*time.Millisecond || d > time.Second {
			t.Fatalf("jitter %s: want 75-100%%", d)
		}
		if d := jitter(time.Second, 1); d < 750*time.Millisecond || d > 900*time.Millisecond {
			t.Fatalf("jitter %s with a multiplier of 1: want 75-90%%", d)
		}
	}
}
