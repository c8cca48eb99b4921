// Package election decides which node answers for a VIP on layer 2. Every
// agent runs the same pure function over the same inputs (the alive members,
// the Node objects, the Service's endpoints), so all agents agree on one owner
// without talking to each other. It imports no Kubernetes client and does no
// I/O.
//
// The owner is chosen by rendezvous (highest random weight) hashing: each
// eligible node gets a score hash(VIP, node) and the highest wins. VIPs spread
// evenly over the nodes, and when a node joins or leaves only the VIPs it wins
// or held move; every other VIP keeps its owner.
package election

import (
	"net/netip"
	"slices"

	"github.com/cespare/xxhash/v2"
	"k8s.io/apimachinery/pkg/labels"
)

// Interface is a network interface of a node with one of its addresses.
type Interface struct {
	Name   string
	Prefix netip.Prefix // the address and its subnet, e.g. 192.0.2.11/24
}

// Node is what the election knows of a node.
type Node struct {
	Name   string
	Labels labels.Set
	// Cordoned nodes (spec.unschedulable) hand their VIPs over.
	Cordoned bool
	// Draining nodes are alive but handing their VIPs over (agent stopping).
	Draining   bool
	Interfaces []Interface
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
}

// Allowed reports whether n may carry a VIP that asks c, wherever its
// interfaces are: the whole test for BGP, where the router reaches any node.
func Allowed(n Node, c Candidacy) bool {
	if n.Cordoned || n.Draining {
		return false
	}
	if c.Selector != nil && !c.Selector.Matches(n.Labels) {
		return false
	}
	return c.LocalNodes == nil || c.LocalNodes[n.Name]
}

// Eligible reports whether n may carry vip on layer 2 and on which interface:
// it must be Allowed and have an interface on the VIP's subnet.
func Eligible(n Node, vip netip.Addr, c Candidacy) (iface string, ok bool) {
	if !Allowed(n, c) {
		return "", false
	}
	return OnSubnet(n.Interfaces, vip, c.Interfaces)
}

// Advertisers are the nodes, among nodes (the alive ones), that advertise a
// BGP VIP asking c: every Allowed one (the router spreads over them), sorted.
func Advertisers(c Candidacy, nodes []Node) []string {
	var out []string
	for _, n := range nodes {
		if Allowed(n, c) {
			out = append(out, n.Name)
		}
	}
	slices.Sort(out)
	return out
}

// OnSubnet returns the first interface (in the order given) with an address on
// vip's subnet, among the allowed names (all when allowed is empty).
func OnSubnet(ifaces []Interface, vip netip.Addr, allowed []string) (string, bool) {
	for _, i := range ifaces {
		if len(allowed) > 0 && !slices.Contains(allowed, i.Name) {
			continue
		}
		if i.Prefix.Masked().Contains(vip) {
			return i.Name, true
		}
	}
	return "", false
}

// Owner picks the node that answers for vip among nodes (the alive ones), and
// the interface it answers on; ok is false when no node is eligible.
func Owner(vip netip.Addr, c Candidacy, nodes []Node) (node, iface string, ok bool) {
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
