package announce

import (
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
)

// bgpPeersOf turns the BGPPeers that select node into the speaker's config.
// passwords maps peer names to their TCP MD5 passwords (the operator copies
// them into one Secret the agents may read); a peer whose password is not
// there yet is left out rather than dialled without it. skipped names the
// peers left out, with why. id is what this node's annotations make it peer
// as (nodeIdentityOf): its ASN, router ID and source addresses win over the
// BGPPeers'; when they are invalid, every peer is left out with why.
func bgpPeersOf(node *corev1.Node, peers []paasv1.BGPPeer, passwords map[string]string, id nodeIdentity) (cfg bgp.Config, skipped map[string]string) {
	skipped = map[string]string{}
	self := election.NodeOf(node)
	if i := slices.IndexFunc(election.InternalIPs(node), netip.Addr.Is4); i >= 0 {
		cfg.RouterID = election.InternalIPs(node)[i] // the first IPv4 InternalIP
	}
	var routerIDFrom string
	// One session per address: of BGPPeers naming the same one, the oldest
	// (then the first by name) wins on every node alike; the others are left
	// out and say so.
	byAge := make([]*paasv1.BGPPeer, 0, len(peers))
	for i := range peers {
		byAge = append(byAge, &peers[i])
	}
	slices.SortStableFunc(byAge, func(a, b *paasv1.BGPPeer) int {
		if c := a.CreationTimestamp.Compare(b.CreationTimestamp.Time); c != 0 {
			return c
		}
		return strings.Compare(a.Name, b.Name)
	})
	owner := map[string]string{} // the peer's address or interface → the BGPPeer that has it
	for _, p := range byAge {
		if !p.DeletionTimestamp.IsZero() {
			continue
		}
		if !election.PeerSelects(p, self) {
			continue
		}
		if id.invalid != "" {
			skipped[p.Name] = id.invalid
			continue
		}
		addr, where, err := peerTarget(p)
		if err != nil {
			skipped[p.Name] = err.Error()
			continue
		}
		if first, taken := owner[where]; taken {
			skipped[p.Name] = fmt.Sprintf("%s is also that of BGPPeer %s, which is older (or as old and first by name): one session per address (or interface), this BGPPeer is left out", where, first)
			continue
		}
		owner[where] = p.Name
		peer := peerOf(p, addr)
		id.apply(&peer)
		if p.Spec.PasswordSecret != nil {
			pw, ok := passwords[p.Name]
			if !ok {
				skipped[p.Name] = passwordNotYet
				continue
			}
			peer.Password = pw
		}
		// An explicit router ID wins; several peers naming different ones
		// cannot all be honoured, so the first by name is.
		if p.Spec.RouterID != "" && (routerIDFrom == "" || p.Name < routerIDFrom) {
			if id, err := netip.ParseAddr(p.Spec.RouterID); err == nil {
				cfg.RouterID, routerIDFrom = id, p.Name
			}
		}
		cfg.Peers = append(cfg.Peers, peer)
	}
	if id.routerID.IsValid() {
		cfg.RouterID = id.routerID
	}
	slices.SortFunc(cfg.Peers, func(a, b bgp.Peer) int { return strings.Compare(a.Name, b.Name) })
	return cfg, skipped
}

// peerOf is the speaker's form of p, its session going to addr (none:
// unnumbered), before the node's identity and the password.
func peerOf(p *paasv1.BGPPeer, addr netip.Addr) bgp.Peer {
	peer := bgp.Peer{
		Name: p.Name, Address: addr, Interface: p.Spec.Interface, Port: 179,
		PeerASN: uint32(p.Spec.PeerASN), MyASN: uint32(p.Spec.MyASN),
		Hold: 3e9, Keepalive: 1e9,
		MultiHop:        p.Spec.EBGPMultiHop != nil && *p.Spec.EBGPMultiHop,
		GracefulRestart: p.Spec.GracefulRestart != nil && *p.Spec.GracefulRestart,
	}
	if p.Spec.PeerPort != 0 {
		peer.Port = uint16(p.Spec.PeerPort)
	}
	if r, err := netip.ParseAddr(p.Spec.InterfaceRouter); err == nil && p.Spec.Interface != "" {
		peer.InterfaceRouter = r.WithZone("")
	}
	if p.Spec.HoldTime != nil {
		peer.Hold = p.Spec.HoldTime.Duration
	}
	if p.Spec.KeepaliveTime != nil {
		peer.Keepalive = p.Spec.KeepaliveTime.Duration
	}
	if b := p.Spec.BFD; b != nil {
		peer.BFD = bfdOf(b)
	}
	return peer
}

// peerTarget is where p's session goes: its address, or (unnumbered) none;
// where names it for the one-session-per-target rule.
func peerTarget(p *paasv1.BGPPeer) (addr netip.Addr, where string, err error) {
	if p.Spec.Interface != "" {
		return netip.Addr{}, "interface " + p.Spec.Interface, nil
	}
	addr, err = netip.ParseAddr(p.Spec.PeerAddress)
	if err != nil {
		return addr, "", fmt.Errorf("peerAddress %q: %w", p.Spec.PeerAddress, err)
	}
	addr = addr.Unmap()
	return addr, "peerAddress " + addr.String(), nil
}

// passwordNotYet is why a peer with a password the agent has not read yet
// is left out; such a peer is asked for again (see BGPAnnouncer.retryAfter).
const passwordNotYet = "its password is not available yet (see the BGPPeer's Accepted condition)"

// bfdOf is the speaker's form of a BGPPeer's bfd: the API server fills the
// defaults and keeps the bounds; these defaults stand in for an object
// written before they existed.
func bfdOf(b *paasv1.BFDSettings) bgp.BFD {
	ms := func(v *int32, def int32) time.Duration {
		if v == nil {
			return time.Duration(def) * time.Millisecond
		}
		return time.Duration(*v) * time.Millisecond
	}
	out := bgp.BFD{Receive: ms(b.ReceiveInterval, 300), Transmit: ms(b.TransmitInterval, 300), Multiplier: 3}
	if m := b.DetectMultiplier; m != nil && *m >= 2 && *m <= 255 {
		out.Multiplier = uint8(*m)
	}
	return out
}

// routeOf is the route of vip with its group's BGP attributes: the host
// route, or the covering route of the group's aggregationLength, never wider
// than the part of the group that holds vip (IPGroupSpec.CoveringBits), unless the
// VIP's Service is externalTrafficPolicy Local (local). The operator gives
// such a group's addresses to Cluster Services only; a Service that turned
// Local while holding one keeps it, and its host route, advertised by the
// nodes with its endpoints only, is more specific than the covering route,
// so the router still sends its traffic there alone.
func routeOf(vip netip.Addr, g *paasv1.IPGroup, local bool) bgp.Route {
	r := bgp.Route{Prefix: netip.PrefixFrom(vip, vip.BitLen())}
	an := g.Spec.Announce
	if an == nil || an.BGP == nil {
		return r
	}
	if bits := g.Spec.CoveringBits(vip); bits > 0 && !local {
		r.Prefix = netip.PrefixFrom(vip, bits).Masked()
	}
	for _, c := range an.BGP.Communities {
		std, large, isLarge, err := ParseCommunity(c)
		switch {
		case err != nil: // the API server's validation keeps these out
		case isLarge:
			r.LargeCommunities = append(r.LargeCommunities, large)
		default:
			r.Communities = append(r.Communities, std)
		}
	}
	if an.BGP.LocalPref != nil {
		r.LocalPref = *an.BGP.LocalPref
	}
	if len(an.BGP.Peers) > 0 {
		r.Peers = slices.Sorted(slices.Values(an.BGP.Peers))
	}
	return r
}

// ParseCommunity reads a standard (65000:100, two 16-bit halves) or large
// (65000:1:2, three 32-bit parts, RFC 8092) community.
func ParseCommunity(s string) (std uint32, large [3]uint32, isLarge bool, err error) {
	parts := strings.Split(s, ":")
	bits := 16
	if len(parts) == 3 {
		bits, isLarge = 32, true
	} else if len(parts) != 2 {
		return 0, large, false, fmt.Errorf("community %q: want ASN:value or ASN:data1:data2", s)
	}
	for i, p := range parts {
		v, err := strconv.ParseUint(p, 10, bits)
		if err != nil {
			return 0, large, false, fmt.Errorf("community %q: part %q is not a %d-bit number", s, p, bits)
		}
		large[i] = uint32(v)
	}
	if isLarge {
		return 0, large, true, nil
	}
	return large[0]<<16 | large[1], [3]uint32{}, false, nil
}

// establishedNodes are the nodes with an established session to any of the
// peers a group advertises to (names; empty: every peer).
func establishedNodes(peers []paasv1.BGPPeer, names []string) map[string]bool {
	out := map[string]bool{}
	for _, p := range peers {
		if len(names) > 0 && !slices.Contains(names, p.Name) {
			continue
		}
		for _, s := range p.Status.Sessions {
			if s.State == paasv1.SessionEstablished {
				out[s.Node] = true
			}
		}
	}
	return out
}

// withOwnSessions is peers with self's session entries kept only where its
// speaker has the session in the same state now: the entries on the
// BGPPeers' status may still be the ones a previous run of this agent wrote
// (an Established session of a killed agent), and this node would list
// itself as advertising before its session is up again. It lists itself
// once its speaker and its status agree, as the node that prunes the
// advertisers, which sees only the status, does. The peers are copies; the
// other nodes' entries stay as their agents wrote them.
func withOwnSessions(peers []paasv1.BGPPeer, self string, live []bgp.Session) []paasv1.BGPPeer {
	state := map[string]string{}
	for _, s := range live {
		state[s.Peer] = s.State
	}
	out := make([]paasv1.BGPPeer, len(peers))
	for i, p := range peers {
		out[i] = p
		out[i].Status.Sessions = slices.DeleteFunc(slices.Clone(p.Status.Sessions), func(s paasv1.BGPSession) bool {
			st, ok := state[p.Name]
			return s.Node == self && (!ok || st != s.State)
		})
	}
	return out
}
