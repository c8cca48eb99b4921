package bgp

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"github.com/google/uuid"
	api "github.com/osrg/gobgp/v4/api"
	"github.com/osrg/gobgp/v4/pkg/apiutil"
	gobgp "github.com/osrg/gobgp/v4/pkg/packet/bgp"
	"google.golang.org/protobuf/proto"
)

// Route is one VIP host route this node advertises.
type Route struct {
	Prefix netip.Prefix // a /32 or /128
	// Communities are standard communities, (ASN<<16)|value.
	Communities []uint32
	// LargeCommunities are RFC 8092 communities: global admin, data 1, data 2.
	LargeCommunities [][3]uint32
	// LocalPref is sent to iBGP peers; 0 leaves it out.
	LocalPref uint32
	// Peers are the names of the only peers to send the route to; nil: all.
	Peers []string
	// GracefulShutdown (RFC 8326) marks a route about to be withdrawn: it
	// carries the GRACEFUL_SHUTDOWN community and, to iBGP peers, LOCAL_PREF
	// 0 (whatever LocalPref says), so the routers prefer any other path and
	// move the traffic before the withdrawal.
	GracefulShutdown bool
}

// GracefulShutdownCommunity is RFC 8326's well-known GRACEFUL_SHUTDOWN
// community, 65535:0.
const GracefulShutdownCommunity uint32 = 0xFFFF0000

// advertised is a route in GoBGP's RIB with its handle; uuid is uuid.Nil
// when it must be added again (the server restarted).
type advertised struct {
	route Route
	uuid  uuid.UUID
	// marked is when the route was first advertised in graceful shutdown
	// (zero: it is not).
	marked time.Time
}

// Advertise converges the advertised routes to routes: new and changed ones
// added (a re-add replaces the old attributes), gone ones withdrawn. Routes
// are kept while no peer is configured and sent once one is.
func (s *Speaker) Advertise(ctx context.Context, routes []Route) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	want := map[netip.Prefix]Route{}
	for _, r := range routes {
		want[r.Prefix] = r
	}
	for p, a := range s.paths {
		if _, keep := want[p]; keep {
			continue
		}
		if a.uuid != uuid.Nil {
			if err := s.server.DeletePath(apiutil.DeletePathRequest{UUIDs: []uuid.UUID{a.uuid}}); err != nil {
				return fmt.Errorf("withdraw %s: %w", p, err)
			}
		}
		delete(s.paths, p)
	}
	now := time.Now()
	for p, r := range want {
		a, ok := s.paths[p]
		if ok && a.uuid != uuid.Nil && sameRoute(a.route, r) {
			continue
		}
		next := advertised{route: r}
		if r.GracefulShutdown {
			next.marked = now
			if ok && a.route.GracefulShutdown {
				next.marked = a.marked
			}
		}
		s.paths[p] = next
	}
	// The policy first: a route restricted to some peers must never reach
	// the others, not even for a moment.
	if err := s.applyPolicyLocked(ctx); err != nil {
		return err
	}
	if err := s.readvertiseLocked(ctx); err != nil {
		return err
	}
	s.notify() // the prefixes sent changed
	return nil
}

// readvertiseLocked adds every route not in the RIB yet.
func (s *Speaker) readvertiseLocked(_ context.Context) error {
	if !s.started {
		return nil
	}
	for p, a := range s.paths {
		if a.uuid != uuid.Nil {
			continue
		}
		path, err := apiPath(a.route)
		if err != nil {
			return fmt.Errorf("advertise %s: %w", p, err)
		}
		resp, err := s.server.AddPath(apiutil.AddPathRequest{Paths: []*apiutil.Path{path}})
		if err != nil {
			return fmt.Errorf("advertise %s: %w", p, err)
		}
		a.uuid = resp[0].UUID
		s.paths[p] = a
	}
	return nil
}

func sameRoute(a, b Route) bool {
	return a.Prefix == b.Prefix && a.LocalPref == b.LocalPref && slices.Equal(a.Communities, b.Communities) &&
		slices.Equal(a.LargeCommunities, b.LargeCommunities) && slices.Equal(a.Peers, b.Peers) &&
		a.GracefulShutdown == b.GracefulShutdown
}

// apiPath is GoBGP's form of r. The next hop is left unspecified so GoBGP
// puts the session's own local address there: each node is its own next hop.
func apiPath(r Route) (*apiutil.Path, error) {
	nlri, err := gobgp.NewIPAddrPrefix(r.Prefix)
	if err != nil {
		return nil, err
	}
	family := gobgp.RF_IPv4_UC
	attrs := []gobgp.PathAttributeInterface{gobgp.NewPathAttributeOrigin(gobgp.BGP_ORIGIN_ATTR_TYPE_IGP)}
	if r.Prefix.Addr().Is4() {
		nh, err := gobgp.NewPathAttributeNextHop(netip.IPv4Unspecified())
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, nh)
	} else {
		family = gobgp.RF_IPv6_UC
		mp, err := gobgp.NewPathAttributeMpReachNLRI(family, []gobgp.PathNLRI{{NLRI: nlri}}, netip.IPv6Unspecified())
		if err != nil {
			return nil, err
		}
		attrs = append(attrs, mp)
	}
	communities := r.Communities
	if r.GracefulShutdown && !slices.Contains(communities, GracefulShutdownCommunity) {
		communities = append(slices.Clip(communities), GracefulShutdownCommunity)
	}
	if len(communities) > 0 {
		attrs = append(attrs, gobgp.NewPathAttributeCommunities(communities))
	}
	if len(r.LargeCommunities) > 0 {
		var lc []*gobgp.LargeCommunity
		for _, c := range r.LargeCommunities {
			lc = append(lc, gobgp.NewLargeCommunity(c[0], c[1], c[2]))
		}
		attrs = append(attrs, gobgp.NewPathAttributeLargeCommunities(lc))
	}
	// GoBGP sends LOCAL_PREF to iBGP peers only (their default 100 when
	// absent) and strips it towards eBGP ones, which lower a path with the
	// GRACEFUL_SHUTDOWN community themselves (RFC 8326, section 4.1).
	switch {
	case r.GracefulShutdown:
		attrs = append(attrs, gobgp.NewPathAttributeLocalPref(0))
	case r.LocalPref > 0:
		attrs = append(attrs, gobgp.NewPathAttributeLocalPref(r.LocalPref))
	}
	return &apiutil.Path{Family: family, Nlri: nlri, Attrs: attrs}, nil
}

// The policy names that never change: the import policy and the statements
// that let out the node's own host routes.
const (
	importPolicy = "vipa-import"
	exportPolicy = "vipa-export"
	hostRoutes4  = "vipa-host-routes-4"
	hostRoutes6  = "vipa-host-routes-6"
)

// policies are the node's global BGP policies.
//
// Import: nothing. A route learned from a router is rejected before it enters
// the RIB (GoBGP keeps it only in that peer's adj-rib-in), so it is never
// sent to another router; only the node's own routes (type local) pass.
//
// Export: only the node's own /32 and /128 host routes (local, exact length),
// everything else rejected. Before that, for each distinct set of allowed
// peers, a statement rejects the routes restricted to that set towards every
// peer outside it. Names are derived from the content, so an unchanged
// policy compares equal.
func policies(routes map[netip.Prefix]advertised, peers map[string]Peer) *api.SetPoliciesRequest {
	// family and allowed peers, joined → prefixes (GoBGP's prefix sets hold one family)
	bySet := map[string][]string{}
	for p, a := range routes {
		if a.route.Peers == nil {
			continue
		}
		key := fmt.Sprintf("%d|%s", p.Addr().BitLen(), strings.Join(a.route.Peers, ","))
		bySet[key] = append(bySet[key], p.String())
	}
	keys := make([]string, 0, len(bySet))
	for k := range bySet {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	req := &api.SetPoliciesRequest{}
	policy := &api.Policy{Name: exportPolicy}
	for i, key := range keys {
		_, names, _ := strings.Cut(key, "|")
		allowed := strings.Split(names, ",")
		var others []string
		for name, p := range peers {
			if !slices.Contains(allowed, name) {
				// Without the zone of an unnumbered peer's link-local
				// address: GoBGP matches the neighbour's address bytes.
				others = append(others, netip.PrefixFrom(p.Address.WithZone(""), p.Address.BitLen()).String())
			}
		}
		if len(others) == 0 {
			continue
		}
		slices.Sort(others)
		prefixes := bySet[key]
		slices.Sort(prefixes)
		ps := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: fmt.Sprintf("vipa-routes-%d", i)}
		for _, p := range prefixes {
			bits := netip.MustParsePrefix(p).Bits()
			ps.Prefixes = append(ps.Prefixes, &api.Prefix{IpPrefix: p, MaskLengthMin: uint32(bits), MaskLengthMax: uint32(bits)})
		}
		ns := &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_NEIGHBOR, Name: fmt.Sprintf("vipa-not-allowed-%d", i), List: others}
		req.DefinedSets = append(req.DefinedSets, ps, ns)
		policy.Statements = append(policy.Statements, &api.Statement{
			Name: fmt.Sprintf("vipa-restrict-%d", i),
			Conditions: &api.Conditions{
				PrefixSet:   &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: ps.Name},
				NeighborSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: ns.Name},
			},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_REJECT},
		})
	}
	acceptOwnRoutes(req, policy)
	imports := &api.Policy{Name: importPolicy, Statements: []*api.Statement{{
		Name:       "vipa-import-own",
		Conditions: &api.Conditions{RouteType: api.Conditions_ROUTE_TYPE_LOCAL},
		Actions:    &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
	}}}
	req.Policies = []*api.Policy{imports, policy}
	req.Assignments = []*api.PolicyAssignment{
		{Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_IMPORT, Policies: []*api.Policy{{Name: importPolicy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT},
		{Name: "global", Direction: api.PolicyDirection_POLICY_DIRECTION_EXPORT, Policies: []*api.Policy{{Name: exportPolicy}}, DefaultAction: api.RouteAction_ROUTE_ACTION_REJECT},
	}
	return req
}

// acceptOwnRoutes adds to the export policy the statements that let out the
// node's own routes: host routes, and the covering routes of groups with an
// aggregationLength (at least /8, /16 for IPv6, as the API bounds it); never
// a default route or one wider than that.
func acceptOwnRoutes(req *api.SetPoliciesRequest, policy *api.Policy) {
	for _, host := range []struct {
		set, prefix string
		shortest    uint32
	}{{hostRoutes4, "0.0.0.0/0", 8}, {hostRoutes6, "::/0", 16}} {
		bits := uint32(netip.MustParsePrefix(host.prefix).Addr().BitLen())
		req.DefinedSets = append(req.DefinedSets, &api.DefinedSet{DefinedType: api.DefinedType_DEFINED_TYPE_PREFIX, Name: host.set,
			Prefixes: []*api.Prefix{{IpPrefix: host.prefix, MaskLengthMin: host.shortest, MaskLengthMax: bits}}})
		policy.Statements = append(policy.Statements, &api.Statement{
			Name: host.set,
			Conditions: &api.Conditions{
				RouteType: api.Conditions_ROUTE_TYPE_LOCAL,
				PrefixSet: &api.MatchSet{Type: api.MatchSet_TYPE_ANY, Name: host.set},
			},
			Actions: &api.Actions{RouteAction: api.RouteAction_ROUTE_ACTION_ACCEPT},
		})
	}
}

// applyPolicyLocked installs the policies when they changed, then has
// every peer's routes re-evaluated against them.
func (s *Speaker) applyPolicyLocked(ctx context.Context) error {
	if !s.started {
		return nil
	}
	want := policies(s.paths, s.peers)
	if s.policy != nil && proto.Equal(want, s.policy) {
		return nil
	}
	// SetPolicies replaces definitions but keeps assignments (it ignores
	// want.Assignments), so the global assignments are set on their own,
	// after the policies they name exist (both always do).
	if err := s.server.SetPolicies(ctx, &api.SetPoliciesRequest{DefinedSets: want.DefinedSets, Policies: want.Policies}); err != nil {
		s.policy = nil // unknown now: set it whole next time
		return fmt.Errorf("set the BGP policies: %w", err)
	}
	for _, assign := range want.Assignments {
		if err := s.server.SetPolicyAssignment(ctx, &api.SetPolicyAssignmentRequest{Assignment: assign}); err != nil {
			s.policy = nil
			return fmt.Errorf("assign the BGP %s policy: %w", assign.Direction, err)
		}
	}
	s.policy = want
	for _, name := range s.peerNamesLocked() {
		addr := s.peers[name].Address.String()
		if err := s.server.ResetPeer(ctx, &api.ResetPeerRequest{Address: addr, Soft: true, Direction: api.ResetPeerRequest_DIRECTION_OUT}); err != nil {
			s.log.V(1).Info("re-evaluate routes of a peer not up yet", "peer", name, "error", err.Error())
		}
	}
	return nil
}
