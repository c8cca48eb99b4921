package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
)

// AdjOut lists, by peer name, the host routes of prefixes in each
// configured peer's Adj-RIB-Out: what the speaker has sent that router (what
// it advertises, after the export policy), not what it was asked to send.
func (s *Speaker) AdjOut(_ context.Context, prefixes []netip.Prefix) (map[string][]netip.Prefix, error) {
	s.mu.Lock()
	addrs := map[string]string{}
	for name, p := range s.peers {
		addrs[name] = p.Address.String()
	}
	started, srv := s.started, s.server
	s.mu.Unlock()
	out := map[string][]netip.Prefix{}
	if !started {
		return out, nil
	}
	for name, addr := range addrs {
		out[name] = []netip.Prefix{}
		for _, fam := range []gobgp.Family{gobgp.RF_IPv4_UC, gobgp.RF_IPv6_UC} {
			err := srv.ListPath(apiutil.ListPathRequest{TableType: api.TableType_TABLE_TYPE_ADJ_OUT, Name: addr, Family: fam},
				func(nlri gobgp.NLRI, _ []*apiutil.Path) {
					if p, err := netip.ParsePrefix(nlri.String()); err == nil && slices.Contains(prefixes, p) {
						out[name] = append(out[name], p)
					}
				})
			if err != nil {
				return nil, fmt.Errorf("list the routes sent to %s: %w", name, err)
			}
		}
		slices.SortFunc(out[name], func(a, b netip.Prefix) int { return a.Addr().Compare(b.Addr()) })
	}
	return out, nil
}
