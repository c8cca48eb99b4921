package bgp

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"github.com/go-logr/logr"
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
			if sess.State == Established || sess.BFD != BFDDown {
				t.Errorf("step %d: session %+v: want not established, BFD Down", i, sess)
			}
		}
	}
}
