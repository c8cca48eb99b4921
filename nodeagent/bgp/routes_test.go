package bgp

import (
	"net/netip"
	"slices"
	"testing"

	api "github.com/osrg/gobgp/v4/api"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
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
			req := policies(tt.routes, peers)
			sets := map[string]*api.DefinedSet{}
			for _, s := range req.DefinedSets {
				sets[s.Name] = s
			}
			got := map[string][2][]string{}
			for _, p := range req.Policies {
				for _, st := range p.Statements {
					if st.Actions.RouteAction != api.RouteAction_ROUTE_ACTION_REJECT {
						continue // the accept statements: TestPoliciesLetOutOnlyOwnHostRoutes
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
			checkPolicyFrame(t, req)
		})
	}
}

// checkPolicyFrame: whatever the restrictions, import takes only the node's
// own routes and export lets out only its host routes, rejecting the rest.
func checkPolicyFrame(t *testing.T, req *api.SetPoliciesRequest) {
	t.Helper()
	dirs := map[api.PolicyDirection]*api.PolicyAssignment{}
	for _, a := range req.Assignments {
		dirs[a.Direction] = a
	}
	for _, dir := range []api.PolicyDirection{api.PolicyDirection_POLICY_DIRECTION_IMPORT, api.PolicyDirection_POLICY_DIRECTION_EXPORT} {
		if a := dirs[dir]; a == nil || a.Name != "global" || a.DefaultAction != api.RouteAction_ROUTE_ACTION_REJECT {
			t.Errorf("%v assignment %v: want global, rejecting by default", dir, a)
		}
	}
	accepts := map[string]*api.Statement{}
	for _, p := range req.Policies {
		for i, st := range p.Statements {
			if st.Actions.RouteAction == api.RouteAction_ROUTE_ACTION_ACCEPT {
				if st.Conditions.RouteType != api.Conditions_ROUTE_TYPE_LOCAL {
					t.Errorf("%s/%s accepts routes that are not the node's own", p.Name, st.Name)
				}
				if p.Name == exportPolicy && i < len(p.Statements)-2 {
					t.Errorf("%s accepts before a restriction", st.Name)
				}
				accepts[p.Name+"/"+st.Name] = st
			}
		}
	}
	if len(accepts) != 3 || accepts[importPolicy+"/vipa-import-own"] == nil || accepts[exportPolicy+"/"+hostRoutes4] == nil || accepts[exportPolicy+"/"+hostRoutes6] == nil {
		t.Errorf("accept statements %v: want own routes in, own host and covering routes out", accepts)
	}
	for _, s := range req.DefinedSets {
		if s.Name == hostRoutes4 && (len(s.Prefixes) != 1 || s.Prefixes[0].IpPrefix != "0.0.0.0/0" || s.Prefixes[0].MaskLengthMin != 8 || s.Prefixes[0].MaskLengthMax != 32) {
			t.Errorf("%s = %v: want /8 to /32 (host and covering routes), never wider", s.Name, s.Prefixes)
		}
		if s.Name == hostRoutes6 && (len(s.Prefixes) != 1 || s.Prefixes[0].IpPrefix != "::/0" || s.Prefixes[0].MaskLengthMin != 16 || s.Prefixes[0].MaskLengthMax != 128) {
			t.Errorf("%s = %v: want /16 to /128 (host and covering routes), never wider", s.Name, s.Prefixes)
		}
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
		family  gobgp.Family
		nexthop string // the unspecified address: GoBGP puts the session's local address there
		attrs   int
	}{
		{"IPv4, no attributes", Route{Prefix: netip.MustParsePrefix("203.0.113.1/32")}, gobgp.RF_IPv4_UC, "0.0.0.0", 2},
		{"IPv6", Route{Prefix: netip.MustParsePrefix("2001:db8::1/128")}, gobgp.RF_IPv6_UC, "::", 2},
		{"communities, large communities, local preference",
			Route{Prefix: netip.MustParsePrefix("203.0.113.1/32"), Communities: []uint32{65000<<16 | 100}, LargeCommunities: [][3]uint32{{65000, 1, 2}}, LocalPref: 200},
			gobgp.RF_IPv4_UC, "0.0.0.0", 5},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			p, err := apiPath(tt.route)
			if err != nil {
				t.Fatal(err)
			}
			if p.Family != tt.family {
				t.Errorf("family %v, want %v", p.Family, tt.family)
			}
			prefix, ok := p.Nlri.(*gobgp.IPAddrPrefix)
			if !ok || prefix.Prefix != tt.route.Prefix {
				t.Errorf("NLRI %v, want %s", p.Nlri, tt.route.Prefix)
			}
			if len(p.Attrs) != tt.attrs {
				t.Fatalf("%d attributes, want %d", len(p.Attrs), tt.attrs)
			}
			switch a := p.Attrs[1].(type) {
			case *gobgp.PathAttributeNextHop:
				if a.Value.String() != tt.nexthop {
					t.Errorf("next hop %s, want %s", a.Value, tt.nexthop)
				}
			case *gobgp.PathAttributeMpReachNLRI:
				if a.Nexthop.String() != tt.nexthop || len(a.Value) != 1 {
					t.Errorf("next hop %s (NLRIs %v), want %s", a.Nexthop, a.Value, tt.nexthop)
				}
			default:
				t.Errorf("second attribute is no next hop: %T", p.Attrs[1])
			}
			if tt.route.LocalPref > 0 {
				if lp, ok := p.Attrs[4].(*gobgp.PathAttributeLocalPref); !ok || lp.Value != tt.route.LocalPref {
					t.Errorf("local preference %v", p.Attrs[4])
				}
			}
		})
	}
}

// TestAPIPathGracefulShutdown: a route in graceful shutdown carries its own
// communities and GRACEFUL_SHUTDOWN, and LOCAL_PREF 0 in place of its own.
func TestAPIPathGracefulShutdown(t *testing.T) {
	for _, r := range []Route{
		{Prefix: netip.MustParsePrefix("203.0.113.1/32"), GracefulShutdown: true},
		{Prefix: netip.MustParsePrefix("2001:db8::1/128"), Communities: []uint32{65000<<16 | 100}, LocalPref: 200, GracefulShutdown: true},
		{Prefix: netip.MustParsePrefix("203.0.113.1/32"), Communities: []uint32{GracefulShutdownCommunity}, GracefulShutdown: true},
	} {
		p, err := apiPath(r)
		if err != nil {
			t.Fatal(err)
		}
		var communities []uint32
		lp := -1
		for _, a := range p.Attrs {
			switch a := a.(type) {
			case *gobgp.PathAttributeCommunities:
				communities = a.Value
			case *gobgp.PathAttributeLocalPref:
				lp = int(a.Value)
			}
		}
		want := append(slices.Clone(r.Communities), GracefulShutdownCommunity)
		want = slices.Compact(want)
		if !slices.Equal(communities, want) {
			t.Errorf("%v: communities %x, want %x", r, communities, want)
		}
		if lp != 0 {
			t.Errorf("%v: local preference %d, want 0", r, lp)
		}
	}
	if sameRoute(Route{GracefulShutdown: true}, Route{}) {
		t.Error("a route in graceful shutdown compares equal to the same route without: it would never be re-sent")
	}
}

func TestReason(t *testing.T) {
	tests := []struct {
		msg    string
		fields fields
		want   string
	}{
		{"failed to connect", fields{"Error": "dial tcp 198.51.100.1:179: connect: connection refused"}, "cannot connect: dial tcp 198.51.100.1:179: connect: connection refused (is the router up"},
		{"received notification", fields{"Code": 6, "Subcode": 2, "Communicated-Reason": "maintenance"}, "the router closed the session: notification code 6 subcode 2 (maintenance)"},
		{"hold timer expired", nil, "hold timer expired"},
		{"Peer Up", nil, ""},
	}
	for _, tt := range tests {
		if got := reason(tt.msg, tt.fields); (tt.want == "" && got != "") || len(got) < len(tt.want) || got[:len(tt.want)] != tt.want {
			t.Errorf("reason(%q) = %q, want %q...", tt.msg, got, tt.want)
		}
	}
}
