package announce

import (
	"net/netip"
	"slices"

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
}

// decideBGP is the pure BGP side of a pass: the routes this node advertises
// (every VIP among vips it may carry, as the alive agents are) and, for the
// VIPs whose advertisers this node prunes on the ledger (one alive agent per
// VIP, by rendezvous hash), those advertisers with an established session;
// listed says for every VIP whether this node is one of them.
func decideBGP(self string, vips map[netip.Addr]vipCandidacy, alive []election.Node, peers []paasv1.BGPPeer) (routes []bgp.Route, records map[netip.Addr][]string, listed map[netip.Addr]bool) {
	records, listed = map[netip.Addr][]string{}, map[netip.Addr]bool{}
	var names []string // every alive agent: one of them records each VIP, even one nobody advertises
	for _, n := range alive {
		names = append(names, n.Name)
	}
	for vip, c := range vips {
		advertisers := election.Advertisers(vip, c.Candidacy, alive)
		if slices.Contains(advertisers, self) {
			routes = append(routes, routeOf(vip, c.group))
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
	slices.SortFunc(routes, func(x, y bgp.Route) int { return x.Prefix.Addr().Compare(y.Prefix.Addr()) })
	return routes, records, listed
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
