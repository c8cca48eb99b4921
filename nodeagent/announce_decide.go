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
	// handoffFrom names the node each VIP was taken over from.
	handoffFrom map[netip.Addr]string
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
	// handOff sends the open connections of VIPs taken over in a planned
	// move back to the previous owner.
	handOff dataplane.Handoffs
	// advertise are the BGP routes this node advertises.
	advertise []bgp.Route
	// record is what this node writes on the ledger about the BGP VIPs.
	record advertiserRecords
	// gained and lost are the L2 VIPs taken and given up in this pass.
	gained, lost []netip.Addr
	// requeue is when to look again to end a hand-over (0: not needed).
	requeue time.Duration
}

// announcerPolicy is the announcer's fixed configuration decide needs.
type announcerPolicy struct {
	self          string
	handoverDelay time.Duration
	speaksBGP     bool
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
	d.own = ownersL2(p.self, o, m.owned, inMajority(o.alive, o.known))
	for vip := range d.own {
		if ip := o.ledger[vip]; ip != nil && !slices.Equal(ip.Status.AnnouncedBy, []string{p.self}) {
			d.claim = append(d.claim, vip)
		}
	}
	d.gained, d.lost = gainedLost(o.changed, m.owned, d.own)
	slices.SortFunc(d.claim, netip.Addr.Compare)

	var next memory
	next.owned = d.own
	d.release, next.releasing, d.requeue = handovers(d.own, m, p.handoverDelay, o.now)
	d.handOff, next.handoffFrom = handoffs(p.self, d.own, d.release, m.handoffFrom, o)
	return d, next
}

// ownersL2 are the L2 VIPs this node owns after a pass, by interface: the
// VIPs in o.changed elected again, every other one as the last pass left it
// (prev), so a pass costs one election per VIP that changed; o.changed nil:
// every VIP is elected. Out of the majority (majority false) it owns none;
// the majority changes only with the agents or the Nodes, which make a pass
// elect every VIP.
func ownersL2(self string, o observation, prev map[netip.Addr]string, majority bool) map[netip.Addr]string {
	own := map[netip.Addr]string{}
	if !majority {
		return own
	}
	elect := func(vip netip.Addr) {
		c, ok := o.vips[vip]
		if !ok || election.ModeOf(c.group) == paasv1.AnnounceBGP {
			return
		}
		if node, iface, ok := election.Owner(vip, c.Candidacy, o.alive); ok && node == self {
			own[vip] = iface
		}
	}
	if o.changed == nil {
		for vip := range o.vips {
			elect(vip)
		}
		return own
	}
	maps.Copy(own, prev)
	for vip := range o.changed {
		delete(own, vip)
		elect(vip)
	}
	return own
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

// handoffs learns from the ledger which node announced each owned VIP before
// this one took it over, keeps that through the hand-over of a VIP this node
// lost, and returns where the open connections of each VIP answered for go.
func handoffs(self string, own, release map[netip.Addr]string, prevFrom map[netip.Addr]string, o observation) (dataplane.Handoffs, map[netip.Addr]string) {
	from := map[netip.Addr]string{}
	for vip, n := range prevFrom {
		from[vip] = n
	}
	for vip := range own {
		ip := o.ledger[vip]
		if ip == nil {
			continue // nobody announced it before
		}
		for _, n := range ip.Status.AnnouncedBy {
			if n != self {
				from[vip] = n
				break
			}
		}
	}
	answered := make(map[netip.Addr]string, len(own)+len(release))
	for vip, iface := range release {
		answered[vip] = iface
	}
	for vip, iface := range own {
		answered[vip] = iface
	}
	out := handoffTargets(answered, from, o.alive)
	for vip := range from {
		if _, ok := out[vip]; !ok {
			delete(from, vip) // lost the VIP, or its previous owner died
		}
	}
	return out, from
}

// handoffTargets maps each VIP answered for that this node took over from a node still alive to that
// node's address on the VIP's subnet, where its open connections still are (see
// dataplane.Handoffs). A VIP whose previous owner is dead, or has no address on the subnet,
// gets none: its connections are gone anyway.
func handoffTargets(answered map[netip.Addr]string, from map[netip.Addr]string, alive []election.Node) dataplane.Handoffs {
	out := dataplane.Handoffs{}
	for vip, prev := range from {
		if _, ours := answered[vip]; !ours {
			continue
		}
		i := slices.IndexFunc(alive, func(n election.Node) bool { return n.Name == prev })
		if i < 0 {
			continue
		}
		for _, ifc := range alive[i].Interfaces {
			if ifc.Prefix.Contains(vip) && ifc.Prefix.Addr() != vip {
				out[vip] = ifc.Prefix.Addr()
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
