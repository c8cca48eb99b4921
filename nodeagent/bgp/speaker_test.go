package bgp

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// TestSpeakerRestarts: the last peer leaving stops BGP, and a peer coming
// back starts it again (GoBGP v4 ends a server with StopBgp for good, so the
// speaker must bring a fresh one). The peer is a closed port on loopback:
// no session, no packet leaves the host.
func TestSpeakerRestarts(t *testing.T) {
	ctx := context.Background()
	s := New(logr.Discard())
	defer s.Stop(ctx)
	cfg := Config{RouterID: netip.MustParseAddr("127.0.0.1"), Peers: []Peer{{Name: "tor", Address: netip.MustParseAddr("127.0.0.1"), Port: 1,
		PeerASN: 64512, MyASN: 64513, Hold: 3 * time.Second, Keepalive: time.Second, BFD: BFD{Receive: 300 * time.Millisecond, Transmit: 300 * time.Millisecond, Multiplier: 3}}}}
	route := []Route{{Prefix: netip.MustParsePrefix("203.0.113.1/32")}}
	for i, step := range []Config{cfg, {}, cfg} {
		if err := s.Configure(ctx, step); err != nil {
			t.Fatalf("step %d: configure %d peers: %v", i, len(step.Peers), err)
		}
		if err := s.Advertise(ctx, route); err != nil {
			t.Fatalf("step %d: advertise: %v", i, err)
		}
		sessions := s.Sessions(ctx)
		if len(sessions) != len(step.Peers) {
			t.Fatalf("step %d: sessions %+v, want %d", i, sessions, len(step.Peers))
		}
		for _, sess := range sessions {
			if sess.State == Established || sess.BFD != paasv1.BFDDown {
				t.Errorf("step %d: session %+v: want not established, BFD Down", i, sess)
			}
		}
	}
}

// TestSpeakerOneBadPeer: GoBGP refusing one peer (its address is another
// peer's) leaves that one out, said on its session; the others are configured.
func TestSpeakerOneBadPeer(t *testing.T) {
	ctx := context.Background()
	s := New(logr.Discard())
	defer s.Stop(ctx)
	peer := func(name, addr string) Peer {
		return Peer{Name: name, Address: netip.MustParseAddr(addr), Port: 1, PeerASN: 64512, MyASN: 64513, Hold: 3 * time.Second, Keepalive: time.Second}
	}
	cfg := Config{RouterID: netip.MustParseAddr("127.0.0.1"), Peers: []Peer{peer("a", "127.0.0.2"), peer("b", "127.0.0.2"), peer("c", "127.0.0.3")}}
	for i := range 2 { // and again: the good ones stay, the bad one stays out
		if err := s.Configure(ctx, cfg); err != nil {
			t.Fatalf("pass %d: configure: %v", i, err)
		}
		got := map[string]Session{}
		for _, sess := range s.Sessions(ctx) {
			got[sess.Peer] = sess
		}
		if len(got) != 3 || got["a"].Address != "127.0.0.2" || got["c"].Address != "127.0.0.3" {
			t.Fatalf("pass %d: sessions %+v: want a and c configured, b reported", i, got)
		}
		if b := got["b"]; b.State != "Idle" || !strings.Contains(b.Message, "not configured") || !strings.Contains(b.Message, "127.0.0.2") {
			t.Errorf("pass %d: session of b %+v: want Idle, saying why it is not configured", i, b)
		}
	}
	// a removed: b, its duplicate, is configured.
	cfg.Peers = cfg.Peers[1:]
	if err := s.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	for _, sess := range s.Sessions(ctx) {
		if sess.Address == "" {
			t.Errorf("session %+v still not configured after its duplicate left", sess)
		}
	}
}

// TestPeersHavePrefixLimit: every session, of either family, bounds what the
// router may send (the import policy alone does not: GoBGP keeps rejected
// routes in the adj-rib-in).
func TestPeersHavePrefixLimit(t *testing.T) {
	for _, addr := range []string{"192.0.2.1", "2001:db8::1"} {
		p := apiPeer(Peer{Name: "tor", Address: netip.MustParseAddr(addr), Port: 179, PeerASN: 64512, MyASN: 64513})
		if len(p.AfiSafis) != 1 {
			t.Fatalf("%s: want one address family, got %d", addr, len(p.AfiSafis))
		}
		af := p.AfiSafis[0]
		if af.PrefixLimits == nil || af.PrefixLimits.MaxPrefixes != maxPrefixes || af.PrefixLimits.Family.Afi != af.Config.Family.Afi {
			t.Errorf("%s: want a limit of %d routes on %v, got %v", addr, maxPrefixes, af.Config.Family, af.PrefixLimits)
		}
	}
}
