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

// NodeInterface is one entry of NodeInterfacesAnnotation.
// +kubebuilder:object:generate=false
type NodeInterface struct {
	Name  string         `json:"name"`
	MAC   string         `json:"mac,omitempty"`
	Addrs []netip.Prefix `json:"addrs"`
}

// ParseNodeInterfaces reads a NodeInterfacesAnnotation value; nil for a
// missing or unreadable one (the node then announces nothing).
func ParseNodeInterfaces(value string) []NodeInterface {
	var out []NodeInterface
	if value == "" || json.Unmarshal([]byte(value), &out) != nil {
		return nil
	}
	return out
}
