package bgp

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/go-logr/logr"
	api "github.com/osrg/gobgp/v4/api"
)

// TestUnnumberedPeer: an unnumbered peer offers both families over its one
// session, each with the prefix limit; one whose link has no router (here,
// an interface that does not exist) is left out, says why, and makes the
// speaker ask to be configured again; the numbered peer beside it converges.
func TestUnnumberedPeer(t *testing.T) {
	p := apiPeer(Peer{Name: "leaf", Interface: "swp1", Address: netip.MustParseAddr("fe80::1").WithZone("swp1"), PeerASN: 64512, MyASN: 64601,
		Hold: 3 * time.Second, Keepalive: time.Second, GracefulRestart: true})
	if p.Conf.NeighborAddress != "fe80::1%swp1" || len(p.AfiSafis) != 2 {
		t.Fatalf("peer %v: want the zoned link-local address and two families", p)
	}
	for i, afi := range []api.Family_Afi{api.Family_AFI_IP, api.Family_AFI_IP6} {
		af := p.AfiSafis[i]
		if af.Config.Family.Afi != afi || af.PrefixLimits.MaxPrefixes != maxPrefixes || af.MpGracefulRestart == nil {
			t.Errorf("family %d: %v, want %v with the prefix limit and graceful restart", i, af, afi)
		}
	}

	ctx := context.Background()
	s := New(logr.Discard())
	defer s.Stop(ctx)
	cfg := Config{RouterID: netip.MustParseAddr("127.0.0.1"), Peers: []Peer{
		{Name: "numbered", Address: netip.MustParseAddr("127.0.0.1"), Port: 1, PeerASN: 64512, MyASN: 64513, Hold: 3 * time.Second, Keepalive: time.Second},
		{Name: "unnumbered", Interface: "vipa-nosuch0", PeerASN: 64512, MyASN: 64513, Hold: 3 * time.Second, Keepalive: time.Second},
	}}
	if err := s.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if !s.Unconfigured() {
		t.Error("Unconfigured: false, want true while the unnumbered peer waits for its router")
	}
	got := map[string]Session{}
	for _, sess := range s.Sessions(ctx) {
		got[sess.Peer] = sess
	}
	if len(got) != 2 || got["numbered"].Address != "127.0.0.1" || !strings.Contains(got["unnumbered"].Message, "interface vipa-nosuch0") {
		t.Errorf("sessions %+v: want the numbered one configured, the unnumbered one saying its interface is missing", got)
	}
	cfg.Peers = cfg.Peers[:1]
	if err := s.Configure(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	if s.Unconfigured() {
		t.Error("Unconfigured: true with every peer configured")
	}
}
