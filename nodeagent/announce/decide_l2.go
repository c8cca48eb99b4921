package announce

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// The layer-2 side of decide: which node owns each L2 VIP, how a VIP lost
// while alive is handed over, and where open connections go back to.

// ownersL2 are the L2 VIPs this node owns after a pass, by interface, and
// the owner the election gives every L2 VIP (elected): the VIPs in o.changed
// elected again, every other one as the last pass left it (prev, prevElected),
// so a pass costs one election per VIP that changed; o.changed nil: every VIP
// is elected. Out of the majority (majority false) it owns none and knows no
// owner; the majority changes only with the agents or the Nodes, which make a
// pass elect every VIP.
func ownersL2(self string, o observation, prev, prevElected map[netip.Addr]string, majority bool) (own, elected map[netip.Addr]string) {
	own, elected = map[netip.Addr]string{}, map[netip.Addr]string{}
	if !majority {
		return own, elected
	}
	elect := func(vip netip.Addr) {
		c, ok := o.vips[vip]
		if !ok || election.ModeOf(c.group) == paasv1.AnnounceBGP {
			return
		}
		node, iface, _ := election.Owner(vip, c.Candidacy, o.alive)
		elected[vip] = node
		if node == self {
			own[vip] = iface
		}
	}
	if o.changed == nil {
		for vip := range o.vips {
			elect(vip)
		}
		return own, elected
	}
	maps.Copy(own, prev)
	maps.Copy(elected, prevElected)
	for vip := range o.changed {
		delete(own, vip)
		delete(elected, vip)
		elect(vip)
	}
	return own, elected
}

// gainedLost are the VIPs gained and lost from prev to own, sorted;
// only those in changed can differ (nil: any).
func gainedLost(changed map[netip.Addr]bool, prev, own map[netip.Addr]string) (gained, lost []netip.Addr) {
	diff := func(vip netip.Addr) {
		_, had := prev[vip]
		_, has := own[vip]
		switch {
		case has && !had:
			gained = append(gained, vip)
		case had && !has:
			lost = append(lost, vip)
		}
	}
	if changed != nil {
		for vip := range changed {
			diff(vip)
		}
	} else {
		for vip := range own {
			diff(vip)
		}
		for vip := range prev {
			diff(vip)
		}
	}
	slices.SortFunc(gained, netip.Addr.Compare)
	slices.SortFunc(lost, netip.Addr.Compare)
	return gained, lost
}

// handovers are the VIPs this node lost less than delay ago and still answers
// for, with when to look again to drop them.
func handovers(owned map[netip.Addr]string, m carryover, delay time.Duration, now time.Time) (release map[netip.Addr]string, releasing map[netip.Addr]handover, requeue time.Duration) {
	releasing = map[netip.Addr]handover{}
	for vip, h := range m.releasing {
		releasing[vip] = h
	}
	for vip, iface := range m.owned {
		if _, still := owned[vip]; !still {
			if _, already := releasing[vip]; !already {
				releasing[vip] = handover{iface: iface, until: now.Add(delay)}
			}
		}
	}
	release = map[netip.Addr]string{}
	for vip, h := range releasing {
		_, ownedAgain := owned[vip]
		if ownedAgain || !now.Before(h.until) {
			delete(releasing, vip)
			continue
		}
		release[vip] = h.iface
		if left := h.until.Sub(now); requeue == 0 || left < requeue {
			requeue = left
		}
	}
	return release, releasing, requeue
}

// handoffs names, for each VIP this node answers for (own or release), the
// node it took the VIP over from, while that node is alive: the node that
// holds the VIP's open connections.
//
// Who that was is decided only from what this agent computes itself. The
// ledger's announcedBy cannot say it: every agent may add its own node to that
// list of any IP (config/admission/agent_status_entries.yaml; the API server
// does not know the election, so it cannot hold an agent to the VIPs it was
// elected for), and an announcer named there may never have owned the VIP.
// The election can: every agent runs it over the same inputs, and a node is
// its owner only by winning it, which would give that node the VIP's traffic
// anyway. So the previous owner is the election's owner of the VIP in the last
// pass (m.elected). An agent that has no such memory of the VIP (its first
// passes after a start, or back in the majority) believes the ledger's
// announcer only when it is the owner the election picks with this node left
// out: the node that owned the VIP before this one came back, had nothing else
// changed.
func handoffs(self string, own, release map[netip.Addr]string, m carryover, o observation) map[netip.Addr]string {
	from := map[netip.Addr]string{}
	for vip := range release {
		if n, ok := m.handoffFrom[vip]; ok {
			from[vip] = n
		}
	}
	for vip := range own {
		if n, ok := m.handoffFrom[vip]; ok {
			from[vip] = n
			continue
		}
		if _, had := m.owned[vip]; had {
			continue // owned before: not taken over
		}
		if n := previousOwner(self, vip, m.elected, o); n != "" {
			from[vip] = n
		}
	}
	for vip, n := range from {
		if !slices.ContainsFunc(o.alive, func(a election.Node) bool { return a.Name == n }) {
			delete(from, vip) // its connections died with it
		}
	}
	return from
}

// previousOwner is the node that owned vip before this one (self) took it
// over, "" when none can be told (see handoffs): the election's owner in the
// last pass (elected), or, when the last pass did not elect vip at all (this
// agent had just started, or was out of the majority), the ledger's announcer
// that the election would pick without self.
func previousOwner(self string, vip netip.Addr, elected map[netip.Addr]string, o observation) string {
	if n, known := elected[vip]; known {
		if n == self {
			return ""
		}
		return n
	}
	ip, c := o.ledger[vip], o.vips[vip]
	if ip == nil {
		return ""
	}
	others := slices.DeleteFunc(slices.Clone(o.alive), func(n election.Node) bool { return n.Name == self })
	n, _, ok := election.Owner(vip, c.Candidacy, others)
	if !ok || !slices.Contains(ip.Status.AnnouncedBy, n) {
		return ""
	}
	return n
}

// handoffTargets maps each VIP of from (a VIP this node took over, and the
// node it took it over from, see handoffs) to an InternalIP of the VIP's
// family of that node in internalIPs, which must be the Node's
// status.addresses as its kubelet wrote them: where its open connections are
// (see dataplane.Handoffs). Never an address a node publishes about itself
// (its interfaces annotation, its NodeView): that is the node's own word, and
// would let it send another machine's connections anywhere on the LAN. The
// kernel sends the segments straight to that address as a neighbour, so an
// InternalIP on one of this node's own subnets (onLink) is taken first, else
// the first of the family. A node with no InternalIP of the family gets none.
func handoffTargets(from map[netip.Addr]string, internalIPs map[string][]netip.Addr, onLink []netip.Prefix) dataplane.Handoffs {
	out := dataplane.Handoffs{}
	for vip, node := range from {
		for _, addr := range internalIPs[node] {
			if addr.Is4() != vip.Is4() || addr == vip {
				continue
			}
			if _, found := out[vip]; !found {
				out[vip] = addr
			}
			if slices.ContainsFunc(onLink, func(p netip.Prefix) bool { return p.Contains(addr) }) {
				out[vip] = addr
				break
			}
		}
	}
	return out
}

// inMajority reports whether this agent sees at least half of the agents the
// cluster knows (Nodes whose agent published its interfaces) alive. Half, not
// more: in a two-node cluster a lone survivor must still answer.
func inMajority(alive []election.Node, known int) bool {
	return 2*len(alive) >= known
}
