package announce

import (
	"net/netip"
	"slices"
	"time"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
)

// The BGP side of decide: which routes this node advertises and what it
// writes on the ledger about who advertises them.

// advertiserRecords is what a node writes on the ledger about the BGP VIPs.
// Each agent may add only its own node to an IP's status.announcedBy (an
// admission policy holds it to that, config/admission/agent_status_entries.yaml):
// every node lists itself where it advertises with a session up, and one
// node per VIP (by rendezvous hash over the alive agents) prunes the nodes
// that no longer do, dead ones included.
type advertiserRecords struct {
	// pruned are the VIPs this node prunes, with the advertisers to keep.
	pruned map[netip.Addr][]string
	// listed says, for every BGP VIP, whether this node lists itself.
	listed map[netip.Addr]bool
	// drained are the routes (host or covering) this node would advertise
	// were it not cordoned, draining or excluded: those it withdraws in
	// graceful shutdown (see bgpGracefulShutdown). Written on no ledger.
	drained map[netip.Prefix]bool
	// noticed is when the pass that decided these noticed what changed, and
	// alive its alive nodes: a change of advertisers each write makes is
	// recorded in the VIP's history from them (advertiserEntries).
	noticed time.Time
	alive   []election.Node
}

// decideBGP is the pure BGP side of a pass: the routes this node advertises
// (every VIP among vips it may carry, as the alive agents are) and, for the
// VIPs whose advertisers this node prunes on the ledger (one alive agent per
// VIP, by rendezvous hash), those advertisers with an established session;
// listed says for every VIP whether this node is one of them; drained names
// the routes it would advertise were it not cordoned, draining or excluded.
// VIPs under one covering route (the group's aggregationLength) make one
// route, with the attributes of the lowest of them.
func decideBGP(self string, vips map[netip.Addr]vipCandidacy, alive []election.Node, peers []paasv1.BGPPeer) (routes []bgp.Route, records map[netip.Addr][]string, listed map[netip.Addr]bool, drained map[netip.Prefix]bool) {
	records, listed, drained = map[netip.Addr][]string{}, map[netip.Addr]bool{}, map[netip.Prefix]bool{}
	var names []string            // every alive agent: one of them records each VIP, even one nobody advertises
	var undrained []election.Node // this node, were it not cordoned, draining or excluded
	for _, n := range alive {
		names = append(names, n.Name)
		if n.Name == self && (n.Cordoned || n.Draining || n.Excluded) {
			n.Cordoned, n.Draining, n.Excluded = false, false, false
			undrained = append(undrained, n)
		}
	}
	for vip, c := range vips {
		advertisers := election.Advertisers(vip, c.Candidacy, alive)
		if slices.Contains(advertisers, self) {
			routes = append(routes, routeOf(vip, c.group, c.LocalNodes != nil))
		} else if len(undrained) > 0 && len(election.Advertisers(vip, c.Candidacy, undrained)) > 0 {
			drained[routeOf(vip, c.group, c.LocalNodes != nil).Prefix] = true
		}
		var peerNames []string
		if an := c.group.Spec.Announce; an != nil && an.BGP != nil {
			peerNames = an.BGP.Peers
		}
		up := establishedNodes(peers, peerNames)
		recorded := slices.DeleteFunc(advertisers, func(n string) bool { return !up[n] })
		listed[vip] = slices.Contains(recorded, self)
		if election.Pick(vip, names) == self {
			records[vip] = recorded
		}
	}
	return oneRoutePerPrefix(routes), records, listed, drained
}

// oneRoutePerPrefix sorts routes by prefix and keeps the first of each:
// VIPs that share a covering route (sorted, so every pass keeps the same).
func oneRoutePerPrefix(routes []bgp.Route) []bgp.Route {
	slices.SortStableFunc(routes, func(x, y bgp.Route) int {
		if c := x.Prefix.Addr().Compare(y.Prefix.Addr()); c != 0 {
			return c
		}
		return x.Prefix.Bits() - y.Prefix.Bits()
	})
	return slices.CompactFunc(routes, func(x, y bgp.Route) bool { return x.Prefix == y.Prefix })
}

// nextAnnouncedBy is an IP's status.announcedBy after self writes its part:
// itself in or out as listed says, and, when self prunes this VIP, without
// the other nodes keep does not name. It never adds another node. Sorted, so
// that every writer agrees on one order.
func nextAnnouncedBy(cur []string, self string, listed, prune bool, keep []string) []string {
	out := []string{}
	for _, n := range cur {
		if n != self && (!prune || slices.Contains(keep, n)) && !slices.Contains(out, n) {
			out = append(out, n)
		}
	}
	if listed {
		out = append(out, self)
	}
	slices.Sort(out)
	return out
}

// leavingRoute is a route this node stopped advertising because it is
// cordoned, draining or excluded: advertised in graceful shutdown until then,
// and withdrawn after.
type leavingRoute struct {
	route bgp.Route // as it was advertised, without the mark
	until time.Time
}

// bgpGracefulShutdown is the pure graceful shutdown (RFC 8326) of a pass: of
// the routes advertised before (prev, as decideBGP gave them; leaving, those
// already in graceful shutdown), every one that want no longer holds only
// because this node is cordoned, draining or excluded (drained, from
// decideBGP) stays advertised, marked (bgp.Route.GracefulShutdown), for delay
// from the pass that first dropped it, and is withdrawn after: the routers
// move its traffic to the other nodes while this one still forwards. A route
// wanted again is advertised unmarked at once; any other route dropped (its
// Service deleted, the last local endpoint gone, the group's selector) is
// withdrawn at once, as is every route when delay is 0. It
// returns the routes to advertise (want and the marked ones, by address),
// the next leaving, and when the next pass must come to withdraw the first
// (0: not needed).
func bgpGracefulShutdown(want []bgp.Route, prev []bgp.Route, leaving map[netip.Prefix]leavingRoute, drained map[netip.Prefix]bool,
	now time.Time, delay time.Duration) (advertise []bgp.Route, next map[netip.Prefix]leavingRoute, requeue time.Duration) {
	if delay <= 0 {
		return want, nil, 0
	}
	wanted := map[netip.Prefix]bool{}
	for _, r := range want {
		wanted[r.Prefix] = true
	}
	next = map[netip.Prefix]leavingRoute{}
	for p, l := range leaving {
		if !wanted[p] && drained[p] && now.Before(l.until) {
			next[p] = l
		}
	}
	for _, r := range prev {
		if _, already := leaving[r.Prefix]; !already && !wanted[r.Prefix] && drained[r.Prefix] {
			next[r.Prefix] = leavingRoute{route: r, until: now.Add(delay)}
		}
	}
	advertise = slices.Clone(want)
	for _, l := range next {
		r := l.route
		r.GracefulShutdown = true
		advertise = append(advertise, r)
		if left := l.until.Sub(now); requeue == 0 || left < requeue {
			requeue = left
		}
	}
	slices.SortFunc(advertise, func(x, y bgp.Route) int { return x.Prefix.Addr().Compare(y.Prefix.Addr()) })
	if len(next) == 0 {
		next = nil
	}
	return advertise, next, requeue
}
