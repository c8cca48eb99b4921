package announce

import (
	"maps"
	"net/netip"
	"slices"
	"time"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
)

// The announcer works in three steps per pass: observe reads everything once
// (observe.go), decide (here) is pure and says what this node does,
// apply (announcer.go, bgp.go) performs it. Every agent runs the
// same decide over the same inputs, so they agree without talking.

// observation is one pass's reading of the cluster, as this agent sees it.
type observation struct {
	now time.Time
	// noticed is when the first event this pass acts on reached the agent
	// (zero: none did, the pass was requeued; now stands for it).
	noticed time.Time
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
	// decides from (probe.go): this node's latest probe of each
	// VIP, and the ledger entries of addresses in use on the LAN.
	probed   map[netip.Addr]probeResult
	lanInUse map[netip.Addr]lanRecord
}

// vipCandidacy is what a VIP asks of the nodes that carry it, and its group.
type vipCandidacy struct {
	election.Candidacy
	group *paasv1.IPGroup
}

// carryover is what the announcer carries from one pass to the next.
type carryover struct {
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
	// announced and not probed yet, or in use on the LAN (probe.go).
	withheld map[netip.Addr]bool
	// takeovers are the VIPs taken over from another node whose claim is
	// not written yet.
	takeovers map[netip.Addr]takeover
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
	// takeovers are the claimed VIPs taken over from another node: each
	// claim adds its entry to the VIP's failover history.
	takeovers map[netip.Addr]takeover
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
	// check again for the host using them, by interface (probe.go).
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
func decide(p announcerPolicy, o observation, m carryover) (decision, carryover) {
	var d decision
	if p.speaksBGP {
		bgpVIPs := map[netip.Addr]vipCandidacy{}
		for vip, c := range o.vips {
			if election.ModeOf(c.group) == paasv1.AnnounceBGP {
				bgpVIPs[vip] = c
			}
		}
		d.advertise, d.record.pruned, d.record.listed, d.record.drained = decideBGP(p.self, bgpVIPs, o.alive, o.peers)
		d.record.noticed, d.record.alive = o.noticed, o.alive
		if d.record.noticed.IsZero() {
			d.record.noticed = o.now
		}
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

	var next carryover
	next.owned, next.elected, next.withheld = owned, elected, withheld
	d.takeovers = takeovers(p.self, d.claim, d.gained, m, o)
	next.takeovers = d.takeovers
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
