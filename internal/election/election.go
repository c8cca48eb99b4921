// Package election holds the one rule of which node may carry a group's VIPs,
// and decides which node answers for a VIP on layer 2. Every agent runs the
// same pure function over the same inputs (the alive members, the Node
// objects, the Service's endpoints), so all agents agree on one owner without
// talking to each other; the operator's IPGroup condition Announceable asks
// the same functions (Eligible, Allowed, PeerSelects) over every Node, so it
// cannot drift from what the agents do. It imports no Kubernetes client and
// does no I/O. NodeOf is the one converter from a Node, CandidacyOf the one
// from an IPGroup.
//
// The owner is chosen by rendezvous (highest random weight) hashing: each
// eligible node gets a score hash(VIP, node) and the highest wins. VIPs spread
// evenly over the nodes, and when a node joins or leaves only the VIPs it wins
// or held move; every other VIP keeps its owner. One exception: an address
// adopted from another load balancer goes to the node that load balancer
// answered from while that node is eligible (Candidacy.Preferred), so the
// switch moves no neighbour entry on the LAN.
package election

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/cespare/xxhash/v2"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Interface is a network interface of a node with one of its addresses.
type Interface struct {
	Name   string
	Prefix netip.Prefix // the address and its subnet, e.g. 192.0.2.11/24
	// Unconfirmed is true when only the node's agent says the node is on
	// Prefix's subnet: none of the addresses the kubelet lists on the Node
	// (status.addresses) is on it. Such a subnet counts only for a VIP whose
	// group names a router on it (Candidacy.Routers), which the admin wrote.
	Unconfirmed bool
}

// Node is what the election knows of a node.
type Node struct {
	Name   string
	Labels labels.Set
	// Cordoned nodes (spec.unschedulable) hand their VIPs over, under the
	// default OnCordon (OnCordonHandover).
	Cordoned bool
	// Excluded nodes carry the label node.kubernetes.io/exclude-from-external-load-balancers
	// (any value, as Kubernetes defines it): they never carry a VIP.
	Excluded bool
	// Draining nodes are alive but handing their VIPs over (agent stopping).
	Draining bool
	// Agent is true when an agent runs on the node: it published its
	// interfaces (paasv1.NodeInterfacesAnnotation).
	Agent      bool
	Interfaces []Interface
	// Addresses are the IP addresses the Node's status.addresses lists: the
	// node's own, which it never carries as a VIP (Claims).
	Addresses []netip.Addr
	// Gateways are the next hops of the node's default routes, as its agent
	// published them: routers the node sends through, never its VIPs.
	Gateways []netip.Addr
}

// OnCordon says what cordoning a node (spec.unschedulable) does to its VIPs.
// Excluding a node (the label), stopping its agent to drain it, deleting it
// or its dying move them whatever it says.
type OnCordon string

const (
	// OnCordonHandover moves the VIPs of a cordoned node to other nodes, as a
	// planned move (no request lost). The default, and the behaviour before
	// there was a choice.
	OnCordonHandover OnCordon = "handover"
	// OnCordonKeep leaves the VIPs where they are: cordon only stops new pods
	// (MetalLB's behaviour since it reverted withdraw-on-cordon, metallb#2470).
	OnCordonKeep OnCordon = "keep"
)

// ParseOnCordon reads the --on-cordon flag value; empty is the default.
func ParseOnCordon(s string) (OnCordon, error) {
	switch p := OnCordon(s); p {
	case "":
		return OnCordonHandover, nil
	case OnCordonHandover, OnCordonKeep:
		return p, nil
	}
	return "", fmt.Errorf("%q: want %s (cordoned nodes hand their VIPs over) or %s (they keep them)", s, OnCordonHandover, OnCordonKeep)
}

// NodeOf is what the election knows of n from the Node object: its labels,
// whether it is cordoned or excluded, and the interfaces its agent published.
// Draining is the agents' liveness to add.
func NodeOf(n *corev1.Node) Node { return OnCordonHandover.NodeOf(n) }

// NodeOf is NodeOf under policy p: with OnCordonKeep a cordoned node is not
// Cordoned to the election. The operator and every agent must use the same
// p; the operator passes its --on-cordon to the agents it deploys.
func (p OnCordon) NodeOf(n *corev1.Node) Node {
	value, agent := n.Annotations[paasv1.NodeInterfacesAnnotation]
	_, excluded := n.Labels[corev1.LabelNodeExcludeBalancers]
	out := Node{Name: n.Name, Labels: labels.Set(n.Labels), Cordoned: n.Spec.Unschedulable && p != OnCordonKeep,
		Excluded: excluded, Agent: agent}
	listed := statusAddresses(n)
	out.Addresses = listed
	for _, ifc := range paasv1.ParseNodeInterfaces(value) {
		for _, p := range ifc.Addrs {
			subnet := p.Masked()
			confirmed := slices.ContainsFunc(listed, subnet.Contains)
			out.Interfaces = append(out.Interfaces, Interface{Name: ifc.Name, Prefix: p, Unconfirmed: !confirmed})
		}
		out.Gateways = append(out.Gateways, ifc.Gateways...)
	}
	return out
}

// statusAddresses are the IP addresses among n's status.addresses (the
// kubelet's: InternalIP, ExternalIP), whatever their type.
func statusAddresses(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if addr, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, addr.Unmap().WithZone(""))
		}
	}
	return out
}

// InternalIPs are n's InternalIP addresses, in the order the Node lists them.
func InternalIPs(n *corev1.Node) []netip.Addr {
	var out []netip.Addr
	for _, a := range n.Status.Addresses {
		if a.Type != corev1.NodeInternalIP {
			continue
		}
		if addr, err := netip.ParseAddr(a.Address); err == nil {
			out = append(out, addr.Unmap())
		}
	}
	return out
}

// Candidacy is what a VIP asks of the node that carries it.
type Candidacy struct {
	// Selector picks the nodes that may carry the VIP; nil selects every node.
	Selector labels.Selector
	// Interfaces restricts the interfaces the VIP may be announced on; empty
	// allows any interface with an address on the VIP's subnet.
	Interfaces []string
	// LocalNodes, when not nil, are the only nodes that may carry the VIP
	// (externalTrafficPolicy Local: the nodes with a ready local endpoint).
	LocalNodes map[string]bool
	// Preferred, when set, is the node that wins while it is eligible: the
	// node another load balancer answered from for an address adopted from
	// it (IP spec.adoptedFromNode). Layer 2 only; the rest of the time the
	// hash decides, and every agent reads the same ledger entry.
	Preferred string
	// Routers are the group's routers (announce.gateway): a subnet one of
	// them is on counts for a node's interface even when none of the Node's
	// own addresses is on it (Interface.Unconfirmed).
	Routers []netip.Addr
}

// ModeOf is how a group's VIPs are announced (L2 when unset).
func ModeOf(g *paasv1.IPGroup) paasv1.AnnounceMode {
	if an := g.Spec.Announce; an != nil && an.Mode != "" {
		return an.Mode
	}
	return paasv1.AnnounceL2
}

// CandidacyOf is what a group announced by L2 or BGP asks of a node; ok is
// false for a group the agents do not announce (None) or with a bad selector
// (which selects no node; the operator reports it on the group).
func CandidacyOf(g *paasv1.IPGroup) (Candidacy, bool) {
	an := g.Spec.Announce
	if ModeOf(g) == paasv1.AnnounceNone {
		return Candidacy{}, false
	}
	var c Candidacy
	if an == nil {
		return c, true
	}
	c.Interfaces = an.Interfaces
	if gw := an.Gateway; gw != nil {
		for _, s := range []string{gw.IPv4, gw.IPv6} {
			if a, err := netip.ParseAddr(s); err == nil {
				c.Routers = append(c.Routers, a.Unmap())
			}
		}
	}
	if an.NodeSelector != nil {
		sel, err := metav1.LabelSelectorAsSelector(an.NodeSelector)
		if err != nil {
			return Candidacy{Selector: labels.Nothing()}, false
		}
		c.Selector = sel
	}
	return c, true
}

// CandidacyOfLedger is CandidacyOf(g) for the address whose ledger entry is
// ip: preferring the node the address was adopted from, if any.
func CandidacyOfLedger(g *paasv1.IPGroup, ip *paasv1.IP) (Candidacy, bool) {
	c, ok := CandidacyOf(g)
	if ok && ip != nil {
		c.Preferred = ip.Spec.AdoptedFromNode
	}
	return c, ok
}

// Selects reports whether c's node selector picks n (nil picks every node).
func Selects(c Candidacy, n Node) bool {
	return c.Selector == nil || c.Selector.Matches(n.Labels)
}

// Allowed reports whether n may carry a VIP that asks c, wherever its
// interfaces are: the whole test for BGP, where the router reaches any node.
func Allowed(n Node, c Candidacy) bool { return NotAllowed(n, c) == "" }

// NotAllowed is why n may not carry a VIP that asks c, wherever its
// interfaces are ("" when it may): Allowed's test, told to a person.
func NotAllowed(n Node, c Candidacy) Refusal {
	switch {
	case n.Draining:
		return RefusedDraining
	case n.Excluded:
		return RefusedExcluded
	case n.Cordoned:
		return RefusedCordoned
	case !Selects(c, n):
		return RefusedSelector
	case c.LocalNodes != nil && !c.LocalNodes[n.Name]:
		return RefusedNoLocalEndpoint
	}
	return ""
}

// Eligible reports whether n may carry vip on layer 2 and on which interface:
// it must be Allowed, not claim vip (Claims), and have an interface on the
// VIP's subnet.
func Eligible(n Node, vip netip.Addr, c Candidacy) (iface string, ok bool) {
	iface, why := NotEligible(n, vip, c)
	return iface, why == ""
}

// NotEligible is why n may not carry vip on layer 2 ("" when it may, with
// the interface it answers on): Eligible's test, told to a person.
func NotEligible(n Node, vip netip.Addr, c Candidacy) (iface string, why Refusal) {
	if Claims(n, vip, true) {
		return "", RefusedClaims
	}
	if why := NotAllowed(n, c); why != "" {
		return "", why
	}
	if iface, ok := onSubnet(n.Interfaces, netip.PrefixFrom(vip, vip.BitLen()), c); ok {
		return iface, ""
	}
	return "", RefusedNoInterface
}

// Claims reports whether n says vip is n's own: one of its status.addresses,
// or what its agent publishes, an address of one of its interfaces, one of
// its default gateways or, on layer 2 (l2), the network or broadcast address
// of an IPv4 subnet of /30 or wider that one is on. Such a node never carries
// vip, and nothing else follows from it: what a node says about itself may
// only ever cost that node (the operator reads the same Node into its claims,
// k8salloc.NodeClaims, and names the node on the address's ledger object).
func Claims(n Node, vip netip.Addr, l2 bool) bool {
	vip = vip.Unmap()
	if slices.Contains(n.Addresses, vip) {
		return true
	}
	for _, gw := range n.Gateways {
		if gw.Unmap().WithZone("") == vip {
			return true
		}
	}
	for _, i := range n.Interfaces {
		addr := i.Prefix.Addr().Unmap()
		if addr == vip {
			return true
		}
		if !l2 || !addr.Is4() || !vip.Is4() || i.Prefix.Bits() > 30 {
			continue
		}
		subnet := netip.PrefixFrom(addr, i.Prefix.Bits()).Masked()
		if vip == subnet.Addr() || vip == broadcast4(subnet) {
			return true
		}
	}
	return false
}

// broadcast4 is the last address of the IPv4 subnet p.
func broadcast4(p netip.Prefix) netip.Addr {
	b := p.Addr().As4()
	for i := range b {
		if bits := p.Bits() - 8*i; bits < 8 {
			b[i] |= byte(0xff >> max(bits, 0))
		}
	}
	return netip.AddrFrom4(b)
}

// EligibleIn reports whether n may carry, on layer 2, VIPs of within (one
// VIP, or a group's whole segment for the operator's Announceable condition),
// and on which interface: it must be Allowed and have an interface on a
// subnet that overlaps within.
func EligibleIn(n Node, within netip.Prefix, c Candidacy) (iface string, ok bool) {
	if !Allowed(n, c) {
		return "", false
	}
	return onSubnet(n.Interfaces, within, c)
}

// PeerSelects reports whether BGPPeer p peers with n: its nodeSelector
// matches (absent: every node; a bad one: none). The agent on n dials exactly
// the peers that select it.
func PeerSelects(p *paasv1.BGPPeer, n Node) bool {
	if p.Spec.NodeSelector == nil {
		return true
	}
	sel, err := metav1.LabelSelectorAsSelector(p.Spec.NodeSelector)
	return err == nil && sel.Matches(n.Labels)
}

// Advertisers are the nodes, among nodes (the alive ones), that advertise
// the BGP VIP vip asking c: every Allowed one that does not claim vip (the
// router spreads over them), sorted.
func Advertisers(vip netip.Addr, c Candidacy, nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		if Allowed(n, c) && !Claims(n, vip, false) {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// onSubnet returns the first interface (in the order given), among the names
// c allows (all when it names none), whose subnet overlaps within and is
// confirmed: a Node address is on it, or one of c's routers.
func onSubnet(ifaces []Interface, within netip.Prefix, c Candidacy) (string, bool) {
	for _, i := range ifaces {
		if len(c.Interfaces) > 0 && !slices.Contains(c.Interfaces, i.Name) {
			continue
		}
		subnet := i.Prefix.Masked()
		if !subnet.Overlaps(within) {
			continue
		}
		if !i.Confirmed(c.Routers) {
			continue
		}
		return i.Name, true
	}
	return "", false
}

// Confirmed reports whether i's subnet is one its node is really on: one of
// the Node's status.addresses is on it, or one of routers (a group's
// announce.gateway, which an admin wrote). What only the node's agent says
// of a subnet counts for nothing else.
func (i Interface) Confirmed(routers []netip.Addr) bool {
	return !i.Unconfirmed || slices.ContainsFunc(routers, i.Prefix.Masked().Contains)
}

// OnConfirmedSubnet reports whether addr lies on a subnet of one of n's
// interfaces that is Confirmed by routers.
func (n Node) OnConfirmedSubnet(addr netip.Addr, routers []netip.Addr) bool {
	addr = addr.Unmap().WithZone("")
	return slices.ContainsFunc(n.Interfaces, func(i Interface) bool {
		return i.Prefix.Masked().Contains(addr) && i.Confirmed(routers)
	})
}

// Owner picks the node that answers for vip among nodes (the alive ones), and
// the interface it answers on; ok is false when no node is eligible.
func Owner(vip netip.Addr, c Candidacy, nodes []Node) (node, iface string, ok bool) {
	if c.Preferred != "" {
		for _, n := range nodes {
			if n.Name != c.Preferred {
				continue
			}
			if i, eligible := Eligible(n, vip, c); eligible {
				return n.Name, i, true
			}
		}
	}
	var best uint64
	for _, n := range nodes {
		i, eligible := Eligible(n, vip, c)
		if !eligible {
			continue
		}
		s := score(vip, n.Name)
		// Ties (practically impossible with 64 bits) go to the smaller name,
		// so the result never depends on the order of nodes.
		if !ok || s > best || (s == best && n.Name < node) {
			best, node, iface, ok = s, n.Name, i, true
		}
	}
	return node, iface, ok
}

// score is the rendezvous weight of node for vip. xxhash is stable across
// processes and versions, which every agent computing the same owner needs.
func score(vip netip.Addr, node string) uint64 {
	b, _ := vip.Unmap().MarshalBinary()
	b = append(b, 0)
	b = append(b, node...)
	return xxhash.Sum64(b)
}

// Pick chooses one of names for vip by the same rendezvous hash as Owner:
// which agent records a BGP VIP's advertisers on the ledger, spread over the nodes.
func Pick(vip netip.Addr, names []string) string {
	var best uint64
	var out string
	for _, n := range names {
		if s := score(vip, n); out == "" || s > best || (s == best && n < out) {
			best, out = s, n
		}
	}
	return out
}
