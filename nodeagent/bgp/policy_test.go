package bgp

import (
	"context"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// router is a GoBGP server standing in for a top-of-rack router, listening
// on a loopback address, passive towards the node (127.0.0.1).
func router(t *testing.T, addr string, port int, asn uint32) *server.BgpServer {
	t.Helper()
	r := server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), nil))
	go r.Serve()
	t.Cleanup(r.Stop)
	ctx := context.Background()
	if err := r.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: asn, RouterId: addr, ListenPort: int32(port), ListenAddresses: []string{addr}}}); err != nil {
		t.Fatalf("start router %s: %v", addr, err)
	}
	if err := r.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: "127.0.0.1", PeerAsn: 64513},
		Transport: &api.Transport{PassiveMode: true},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: &api.Family{Afi: api.Family_AFI_IP, Safi: api.Family_SAFI_UNICAST}, Enabled: true}}},
	}}); err != nil {
		t.Fatalf("router %s: add the node: %v", addr, err)
	}
	return r
}

// prefixes lists the IPv4 prefixes of a table of srv (neighbor: its adj-rib-in).
func prefixes(t *testing.T, srv *server.BgpServer, table api.TableType, neighbor string) []string {
	t.Helper()
	var out []string
	err := srv.ListPath(apiutil.ListPathRequest{TableType: table, Name: neighbor, Family: gobgp.RF_IPv4_UC}, func(p gobgp.NLRI, _ []*apiutil.Path) {
		out = append(out, p.String())
	})
	if err != nil {
		t.Fatalf("list %v %s: %v", table, neighbor, err)
	}
	slices.Sort(out)
	return out
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

// TestImportNothingExportOnlyHostRoutes: two routers on loopback; router A
// announces 198.51.100.0/24. The node keeps it out of its RIB (only A's
// adj-rib-in has it) and never sends it to router B; of the node's own
// routes the /32 and a covering /24 (an IPGroup's aggregationLength) leave,
// a default route handed to Advertise by mistake does not.
func TestImportNothingExportOnlyOwnRoutes(t *testing.T) {
	ctx := context.Background()
	port := freePort(t)
	a := router(t, "127.0.0.2", port, 64512)
	b := router(t, "127.0.0.3", port, 64514)
	learned, err := apiPath(Route{Prefix: netip.MustParsePrefix("198.51.100.0/24")})
	if err != nil {
		t.Fatal(err)
	}
	learned.Attrs[1], _ = gobgp.NewPathAttributeNextHop(netip.MustParseAddr("127.0.0.2"))
	if _, err := a.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{learned}}); err != nil {
		t.Fatalf("router A: announce: %v", err)
	}

	s := New(logr.Discard())
	defer s.Stop(ctx)
	peer := func(name, addr string, asn uint32) Peer {
		return Peer{Name: name, Address: netip.MustParseAddr(addr), Port: uint16(port), PeerASN: asn, MyASN: 64513, Hold: 9 * time.Second, Keepalive: 3 * time.Second}
	}
	if err := s.Configure(ctx, Config{RouterID: netip.MustParseAddr("127.0.0.1"), Peers: []Peer{peer("a", "127.0.0.2", 64512), peer("b", "127.0.0.3", 64514)}}); err != nil {
		t.Fatal(err)
	}
	if err := s.Advertise(ctx, []Route{{Prefix: netip.MustParsePrefix("203.0.113.1/32")}, {Prefix: netip.MustParsePrefix("203.0.113.0/24")},
		{Prefix: netip.MustParsePrefix("0.0.0.0/0")}}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for {
		sent := fmt.Sprint(prefixes(t, a, api.TableType_TABLE_TYPE_ADJ_IN, "127.0.0.1"), prefixes(t, b, api.TableType_TABLE_TYPE_ADJ_IN, "127.0.0.1"))
		in := prefixes(t, s.server, api.TableType_TABLE_TYPE_ADJ_IN, "127.0.0.2")
		if sent == "[203.0.113.0/24 203.0.113.1/32] [203.0.113.0/24 203.0.113.1/32]" && len(in) == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("routers got %s from the node, the node's adj-rib-in from A %v: want the /32 and /24 at both, A's /24 received", sent, in)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// A's route arrived (adj-rib-in above); give it time to travel on.
	time.Sleep(2 * time.Second)
	if got := prefixes(t, s.server, api.TableType_TABLE_TYPE_GLOBAL, ""); !slices.Equal(got, []string{"0.0.0.0/0", "203.0.113.0/24", "203.0.113.1/32"}) {
		t.Errorf("the node's RIB holds %v: want only its own routes", got)
	}
	if got := prefixes(t, b, api.TableType_TABLE_TYPE_ADJ_IN, "127.0.0.1"); !slices.Equal(got, []string{"203.0.113.0/24", "203.0.113.1/32"}) {
		t.Errorf("router B got %v from the node: want the /32 and the /24, never the default route", got)
	}
	if got := prefixes(t, b, api.TableType_TABLE_TYPE_GLOBAL, ""); slices.Contains(got, "198.51.100.0/24") {
		t.Errorf("router B learned A's route: %v", got)
	}
	// What explain shows per session: the /32 and the /24 (a covering route, which the
	// export policy lets out) in each Adj-RIB-Out, a route never advertised in none.
	out, err := s.AdjOut(ctx, []netip.Prefix{netip.MustParsePrefix("203.0.113.1/32"), netip.MustParsePrefix("203.0.113.0/24"), netip.MustParsePrefix("203.0.113.9/32")})
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprint(out); got != "map[a:[203.0.113.0/24 203.0.113.1/32] b:[203.0.113.0/24 203.0.113.1/32]]" {
		t.Errorf("AdjOut %s: want the /32 and the /24 sent to a and b, and no route never advertised", got)
	}
}
