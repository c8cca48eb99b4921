package main

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net/netip"
	"os"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"github.com/osrg/gobgp/v4/pkg/server"
)

// runRouter is a router with a table of n routes for the node (eBGP, passive: the node
// dials), says "ready" once they are in its RIB, and runs until its stdin closes.
func runRouter(n int) error {
	ctx := context.Background()
	r := server.NewBgpServer(server.LoggerOption(slog.New(slog.DiscardHandler), nil))
	go r.Serve()
	defer r.Stop()
	if err := r.StartBgp(ctx, &api.StartBgpRequest{Global: &api.Global{Asn: routerASN, RouterId: "192.0.2.1",
		ListenPort: 179, ListenAddresses: []string{routerAddr}}}); err != nil {
		return fmt.Errorf("start the router: %w", err)
	}
	v6 := &api.Family{Afi: api.Family_AFI_IP6, Safi: api.Family_SAFI_UNICAST}
	if err := r.AddPeer(ctx, &api.AddPeerRequest{Peer: &api.Peer{
		Conf:      &api.PeerConf{NeighborAddress: nodeAddr, PeerAsn: nodeASN},
		Transport: &api.Transport{PassiveMode: true},
		AfiSafis:  []*api.AfiSafi{{Config: &api.AfiSafiConfig{Family: v6, Enabled: true}}},
	}}); err != nil {
		return fmt.Errorf("router: add the node: %w", err)
	}
	const batch = 1000
	for start := 0; start < n; start += batch {
		var paths []*apiutil.Path
		for i := start; i < min(start+batch, n); i++ {
			p, err := route(i)
			if err != nil {
				return err
			}
			paths = append(paths, p)
		}
		if _, err := r.AddPath(apiutil.AddPathRequest{Paths: paths}); err != nil {
			return fmt.Errorf("router: add routes: %w", err)
		}
	}
	fmt.Println("ready")
	_, _ = io.Copy(io.Discard, os.Stdin)
	return nil
}

// route is the i-th route of the table: a /64 of 2001:db8::/32 with the router as next hop.
func route(i int) (*apiutil.Path, error) {
	var a [16]byte
	copy(a[:], netip.MustParseAddr("2001:db8::").AsSlice())
	a[4], a[5], a[6], a[7] = 0x10|byte(i>>24), byte(i>>16), byte(i>>8), byte(i)
	nlri, err := gobgp.NewIPAddrPrefix(netip.PrefixFrom(netip.AddrFrom16(a), 64))
	if err != nil {
		return nil, err
	}
	mp, err := gobgp.NewPathAttributeMpReachNLRI(gobgp.RF_IPv6_UC, []gobgp.PathNLRI{{NLRI: nlri}}, netip.MustParseAddr(routerAddr))
	if err != nil {
		return nil, err
	}
	return &apiutil.Path{Family: gobgp.RF_IPv6_UC, Nlri: nlri,
		Attrs: []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(gobgp.BGP_ORIGIN_ATTR_TYPE_IGP), mp}}, nil
}
