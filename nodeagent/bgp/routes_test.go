package bgp

import (
	"net/netip"
	"testing"

	api "github.com/osrg/gobgp/v3/api"
	gobgplog "github.com/osrg/gobgp/v3/pkg/log"
)

func TestExportPolicy(t *testing.T) {
	peers := map[string]Peer{
		"tor-a": {Name: "tor-a", Address: netip.MustParseAddr("198.51.100.1")},
		"tor-b": {Name: "tor-b", Address: netip.MustParseAddr("198.51.100.2")},
		"tor-6": {Name: "tor-6", Address: netip.MustParseAddr("2001:db8::1")},
	}
	route := func(prefix string, peers ...string) advertised {
		r := Route{Prefix: netip.MustParsePrefix(prefix)}
		if len(peers) > 0 {
			r.Peers = peers
		}
		return advertised{route: r}
	}
	routes := func(rs ...advertised) map[netip.Prefix]advertised {
		out := map[netip.Prefix]advertised{}
		for _, r := range rs {
			out[r.route.Prefix] = r
		}
		return out
	}
	tests := []struct {
		desc   string
		routes map[netip.Prefix]advertised
		// want: statement name → rejected prefixes and the neighbours they are rejected towards
		want map[string][2][]string
	}{
		{"unrestricted routes need no policy", routes(route("203.0.113.1/32"), route("2001:db8:1::1/128")), map[string][2][]string{}},
		{"a route for tor-a only is rejected towards the others",
			routes(route("203.0.113.1/32", "tor-a"), route("203.0.113.2/32")),
			map[string][2][]string{"vipa-restrict-0": {{"203.0.113.1/32"}, {"198.51.100.2/32", "2001:db8::1/128"}}}},
		{"routes sharing a peer set share a statement; families apart",
			routes(route("203.0.113.1/32", "tor-a", "tor-b"), route("203.0.113.2/32", "tor-a", "tor-b"), route("2001:db8:1::1/128", "tor-a", "tor-b")),
			map[string][2][]string{
				"vipa-restrict-0": {{"2001:db8:1::1/128"}, {"2001:db8::1/128"}},
				"vipa-restrict-1": {{"203.0.113.1/32", "203.0.113.2/32"}, {"2001:db8::1/128"}}}},
		{"a route allowed to every peer needs no statement",
			routes(route("203.0.113.1/32", "tor-6", "tor-a", "tor-b")), map[string][2][]string{}},
		{"a route naming only a missing peer goes nowhere",
			routes(route("203.0.113.1/32", "gone")),
			map[string][2][]string{"vipa-restrict-0": {{"203.0.113.1/32"}, {"198.51.100.1/32", "198.51.100.2/32", "2001:db8::1/128"}}}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			req := exportPolicy(tt.routes, peers)
			sets := map[string]*api.DefinedSet{}
			for _, s := range req.DefinedSets {
				sets[s.Name] = s
			}
			got := map[string][2][]string{}
			for _, p := range req.Policies {
				for _, st := range p.Statements {
					if st.Actions.RouteAction != api.RouteAction_REJECT {
						t.Errorf("statement %s does not reject", st.Name)
					}
					var prefixes []string
					for _, pr := range sets[st.Conditions.PrefixSet.Name].Prefixes {
						prefixes = append(prefixes, pr.IpPrefix)
						bits := netip.MustParsePrefix(pr.IpPrefix).Bits()
						if pr.MaskLengthMin != uint32(bits) || pr.MaskLengthMax != uint32(bits) {
							t.Errorf("%s matches lengths %d-%d, want exactly %d", pr.IpPrefix, pr.MaskLengthMin, pr.MaskLengthMax, bits)
						}
					}
					got[st.Name] = [2][]string{prefixes, sets[st.Conditions.NeighborSet.Name].List}
				}
			}
			if len(got) != len(tt.want) {
				t.Fatalf("statements %v, want %v", got, tt.want)
			}
			for name, w := range tt.want {
				g := got[name]
				if !equal(g[0], w[0]) || !equal(g[1], w[1]) {
					t.Errorf("%s: rejects %v towards %v, want %v towards %v", name, g[0], g[1], w[0], w[1])
				}
			}
			if len(tt.want) > 0 && (len(req.Assignments) != 1 || req.Assignments[0].DefaultAction != api.RouteAction_ACCEPT) {
				t.Errorf("assignments %v: want the policy on global export, accepting the rest", req.Assignments)
			}
		})
	}
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestAPIPath(t *testing.T) {
	tests := []struct {
		desc    string
		route   Route
		family  api.Family_Afi
		nexthop string // the unspecified address: GoBGP puts the session's local address there
		attrs   int
	}{
		{"IPv4, no attributes", Route{Prefix: netip.MustParsePrefix("203.0.113.1/32")}, api.Family_AFI_IP, "0.0.0.0", 2},
		{"IPv6", Route{Prefix: netip.MustParsePrefix("2001:db8::1/128")}, api.Family_AFI_IP6, "::", 2},
		{"communities, large communities, local preference",
			Route{Prefix: netip.MustParsePrefix("203.0.113.1/32"), Communities: []uint32{65000<<16 | 100}, LargeCommunities: [][3]uint32{{65000, 1, 2}}, LocalPref: 200},
			api.Family_AFI_IP, "0.0.0.0", 5},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p := apiPath(tt.route)
			if p.Family.Afi != tt.family || p.Family.Safi != api.Family_SAFI_UNICAST {
				t.Errorf("family %v", p.Family)
			}
			var prefix api.IPAddressPrefix
			if err := p.Nlri.UnmarshalTo(&prefix); err != nil || prefix.Prefix != tt.route.Prefix.Addr().String() || int(prefix.PrefixLen) != tt.route.Prefix.Bits() {
				t.Errorf("NLRI %v (%v), want %s", &prefix, err, tt.route.Prefix)
			}
			if len(p.Pattrs) != tt.attrs {
				t.Fatalf("%d attributes, want %d", len(p.Pattrs), tt.attrs)
			}
			var nh api.NextHopAttribute
			var mp api.MpReachNLRIAttribute
			switch {
			case p.Pattrs[1].UnmarshalTo(&nh) == nil:
				if nh.NextHop != tt.nexthop {
					t.Errorf("next hop %s, want %s", nh.NextHop, tt.nexthop)
				}
			case p.Pattrs[1].UnmarshalTo(&mp) == nil:
				if len(mp.NextHops) != 1 || mp.NextHops[0] != tt.nexthop {
					t.Errorf("next hops %v, want %s", mp.NextHops, tt.nexthop)
				}
			default:
				t.Errorf("second attribute is no next hop: %v", p.Pattrs[1].TypeUrl)
			}
			var lp api.LocalPrefAttribute
			if tt.route.LocalPref > 0 && (p.Pattrs[4].UnmarshalTo(&lp) != nil || lp.LocalPref != tt.route.LocalPref) {
				t.Errorf("local preference %v", p.Pattrs[4])
			}
		})
	}
}

func TestReason(t *testing.T) {
	tests := []struct {
		msg    string
		fields gobgplog.Fields
		want   string
	}{
		{"failed to connect", gobgplog.Fields{"Error": "dial tcp 198.51.100.1:179: connect: connection refused"}, "cannot connect: dial tcp 198.51.100.1:179: connect: connection refused (is the router up"},
		{"received notification", gobgplog.Fields{"Code": 6, "Subcode": 2, "Communicated-Reason": "maintenance"}, "the router closed the session: notification code 6 subcode 2 (maintenance)"},
		{"hold timer expired", nil, "hold timer expired"},
		{"Peer Up", nil, ""},
	}
	for _, tt := range tests {
		if got := reason(tt.msg, tt.fields); (tt.want == "" && got != "") || len(got) < len(tt.want) || got[:len(tt.want)] != tt.want {
			t.Errorf("reason(%q) = %q, want %q...", tt.msg, got, tt.want)
		}
	}
}
