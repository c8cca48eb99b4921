package nodeagent

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// The announcer works in three steps per pass: observe reads everything once
// (announce_observe.go), decide (here) is pure and says what this node does,
// apply (announcer.go, bgp_announcer.go) performs it. Every agent runs the
// same decide over the same inputs, so they agree without talking.

// observation is one pass's reading of the cluster, as this agent sees it.
type observation struct {
	now time.Time
	// vips are the VIPs announced by L2 or BGP, with what each asks of the
	// nodes that carry it (only VIPs the ledger gives to their Service).
	vips map[netip.Addr]vipCandidacy
	// alive are the Nodes whose agents are alive, as the election sees them.
	alive []election.Node
	// known is how many Nodes run an agent at all (alive or not).
	known int
	// ledger holds the ledger entry of each VIP in vips (and of no other).
	ledger map[netip.Addr]*paasv1.IP
	// peers are the BGPPeers (read only when this agent speaks BGP).
	peers []paasv1.BGPPeer
	// changed are the VIPs whose candidacy may have changed since the last
	// pass: only those are elected again (nil: every VIP is).
	changed map[netip.Addr]bool
	// probed and lanInUse are what probing before the first announcement
	// decides from (announce_probe.go): this node's latest probe of each
	// VIP, and the ledger entries of addresses in use on the LAN.
	probed   map[netip.Addr]probeResult
	lanInUse map[netip.Addr]lanRecord
}

// vipCandidacy is what a VIP asks of the nodes that carry it, and its group.
type vipCandidacy struct {
	election.Candidacy
	group *paasv1.IPGroup
}

// memory is what the announcer carries from one pass to the next.
type memory struct {
	// owned are the L2 VIPs this node owned after the last pass, by interface.
	owned map[netip.Addr]string
	// releasing are the VIPs lost while alive, still answered for a while.
	releasing map[netip.Addr]handover
	// elected is the L2 owner the election gave each VIP in the last pass,
	// whichever node it was ("" when no node was eligible); a VIP absent was
	// not elected (this agent had just started, or was out of the majority).
	elected map[netip.Addr]string
	// handoffFrom names the node each VIP answered for was taken over from.
	handoffFrom map[netip.Addr]string
	// withheld are the VIPs of owned that were not answered for: never
	// announced and not probed yet, or in use on the LAN (announce_probe.go).
	withheld map[netip.Addr]bool
}

type handover struct {
	iface string
	until time.Time
}

// decision is what this node does after a pass.
type decision struct {
	// own are the L2 VIPs this node owns, by the interface it answers on.
	own map[netip.Addr]string
	// release are the VIPs this node lost less than the hand-over delay ago:
	// still answered (without gratuitous ARP) so the new owner's comes first.
	release map[netip.Addr]string
	// claim are the owned VIPs whose ledger object does not name this node
	// as its only announcer yet.
	claim []netip.Addr
	// handOff names, for each VIP taken over from a node still alive, that
	// node: the open connections go back to it, at the address its Node's
	// kubelet wrote (handoffTargets).
	handOff map[netip.Addr]string
	// advertise are the BGP routes this node advertises.
	advertise []bgp.Route
	// record is what this node writes on the ledger about the BGP VIPs.
	record advertiserRecords
	// gained and lost are the L2 VIPs taken and given up in this pass.
	gained, lost []netip.Addr
	// requeue is when to look again to end a hand-over (0: not needed).
	requeue time.Duration
	// probe are the VIPs to probe before their first announcement, or to
	// check again for the host using them, by interface (announce_probe.go).
	probe map[netip.Addr]string
}

// announcerPolicy is the announcer's fixed configuration decide needs.
type announcerPolicy struct {
	self          string
	handoverDelay time.Duration
	speaksBGP     bool
	probe         ProbeConfig
}

// decide is the pure core of a pass: from what was observed and what the
// last pass left, what this node owns, releases, advertises, claims and hands
// off, and what the next pass remembers.
func decide(p announcerPolicy, o observation, m memory) (decision, memory) {
	var d decision
	if p.speaksBGP {
		bgpVIPs := map[netip.Addr]vipCandidacy{}
		for vip, c := range o.vips {
			if election.ModeOf(c.group) == paasv1.AnnounceBGP {
				bgpVIPs[vip] = c
			}
		}
		d.advertise, d.record.pruned, d.record.listed = decideBGP(p.self, bgpVIPs, o.alive, o.peers)
	}
	// Cut off from most agents (our link is down, or a partition): the
	// others elect owners without us, so we must go quiet rather than
	// answer for every VIP at once. BGP is unaffected: the router sees
	// which sessions are up.
	var elected, owned map[netip.Addr]string
	var withheld map[netip.Addr]bool
	var recheck time.Duration
	owned, elected = ownersL2(p.self, o, m.owned, m.elected, inMajority(o.alive, o.known))
	d.own, withheld, d.probe, recheck = probeGate(p.probe, p.self, o, owned, inMajority(o.alive, o.known))
	for vip := range d.own {
		if ip := o.ledger[vip]; ip != nil && !slices.Equal(ip.Status.AnnouncedBy, []string{p.self}) {
			d.claim = append(d.claim, vip)
		}
	}
	d.gained, d.lost = gainedLost(o.changed, m.owned, owned)
	slices.SortFunc(d.claim, netip.Addr.Compare)

	var next memory
	next.owned, next.elected, next.withheld = owned, elected, withheld
	// A VIP withheld was never answered for: losing it hands nothing over.
	answered := m
	answered.owned = maps.Clone(m.owned)
	maps.DeleteFunc(answered.owned, func(vip netip.Addr, _ string) bool { return m.withheld[vip] })
	d.release, next.releasing, d.requeue = handovers(d.own, answered, p.handoverDelay, o.now)
	if recheck > 0 && (d.requeue == 0 || recheck < d.requeue) {
		d.requeue = recheck
	}
	d.handOff = handoffs(p.self, d.own, d.release, m, o)
	next.handoffFrom = d.handOff
	return d, next
}

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
func handovers(owned map[netip.Addr]string, m memory, delay time.Duration, now time.Time) (release map[netip.Addr]string, releasing map[netip.Addr]handover, requeue time.Duration) {
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
func handoffs(self string, own, release map[netip.Addr]string, m memory, o observation) map[netip.Addr]string {
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
