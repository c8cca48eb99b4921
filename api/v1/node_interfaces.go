package v1

import (
	"encoding/json"
	"net/netip"
)

// NodeInterfacesAnnotation is set on each Node by the agent running there: the
// node's interfaces with their MACs and addresses, as JSON. Every agent reads it
// to know which nodes can announce a VIP on its subnet (and which MACs are the
// cluster's own), and the operator to tell an IPGroup that no node can announce.
const NodeInterfacesAnnotation = "vip.paas.org/interfaces"

// ClaimedByAnnotation is set by the operator on an IP ledger object whose
// address a Service holds while Nodes list it among their own (their
// status.addresses, or what their agents publish in NodeInterfacesAnnotation
// on a subnet they are on): those Nodes' names, sorted, comma-separated.
// The claim is those nodes' conflict, never the Service's: the Service keeps
// the address, the other nodes carry it, and no agent lets a claiming node
// carry it (each reads the same annotation on the Nodes). Each Node named gets
// a Warning Event with reason EventClaimsServiceAddress.
const ClaimedByAnnotation = "vip.paas.org/claimed-by"

// EventClaimsServiceAddress is the reason of the Warning Event on a Node that
// lists, among its own addresses, one a Service holds.
const EventClaimsServiceAddress = "ClaimsServiceAddress"

// NodeInterface is one entry of NodeInterfacesAnnotation.
// +kubebuilder:object:generate=false
type NodeInterface struct {
	Name  string         `json:"name"`
	MAC   string         `json:"mac,omitempty"`
	Addrs []netip.Prefix `json:"addrs"`
	// Routers are the routers the node's main routing table reaches by this
	// interface, at most one per family (a default route's first), and
	// Default the families ("IPv4", "IPv6") whose default route leaves by it:
	// the operator reads from them whether replies to a group's VIPs have a
	// way back (the IPGroup condition ReturnPath).
	Routers []netip.Addr `json:"routers,omitempty"`
	Default []string     `json:"default,omitempty"`
	// Gateways are the next hops of the node's default routes (IPv4 and
	// IPv6) through this interface: a router on the link, which no Service
	// may be given. The node says so itself, so they are its claims, like
	// Addrs.
	Gateways []netip.Addr `json:"gateways,omitempty"`
}

// MinInterfacePrefixV4 and MinInterfacePrefixV6 are the shortest prefixes an
// interface's address is read with: a node says it is on a network no wider
// than a /16 (IPv4) or a /48 (IPv6). A wider one, such as 203.0.113.7/0, is
// no LAN any VIP could be announced on but a claim on every subnet, so it
// counts as the address alone (Plausible). The NodeView schema refuses it.
const (
	MinInterfacePrefixV4 = 16
	MinInterfacePrefixV6 = 48
)

// Plausible is p, or p's address alone (a /32 or /128) when p is wider than
// MinInterfacePrefixV4 or MinInterfacePrefixV6: the address stays the node's
// own, the subnet counts for nothing.
func Plausible(p netip.Prefix) netip.Prefix {
	minBits := MinInterfacePrefixV6
	if p.Addr().Unmap().Is4() {
		minBits = MinInterfacePrefixV4
	}
	if p.Bits() < minBits {
		return netip.PrefixFrom(p.Addr(), p.Addr().BitLen())
	}
	return p
}

// ParseNodeInterfaces reads a NodeInterfacesAnnotation value; nil for a
// missing or unreadable one (the node then announces nothing). Every address
// is read Plausible.
func ParseNodeInterfaces(value string) []NodeInterface {
	var out []NodeInterface
	if value == "" || json.Unmarshal([]byte(value), &out) != nil {
		return nil
	}
	for i := range out {
		for j, p := range out[i].Addrs {
			out[i].Addrs[j] = Plausible(p)
		}
	}
	return out
}
