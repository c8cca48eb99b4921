package v1

// The per-node BGP identity: annotations an administrator (or the node's
// kubelet) sets on a Node to give that node's sessions a local ASN, router ID
// or source address of their own, as leaf-spine fabrics give each rack or
// node its own ASN. Annotations, not labels: a label value cannot hold an IPv6
// address. What a Node says about itself changes only that node's sessions,
// and the agent checks each value before it uses it (nodeagent/announce,
// bgp_node.go); the agent itself may not write them
// (config/admission/agent_node_writes.yaml).
const (
	// NodeBGPASNAnnotation is the node's local ASN (1-4294967294, not 23456),
	// in place of every BGPPeer's myASN on this node.
	NodeBGPASNAnnotation = "vip.paas.org/bgp-asn"
	// NodeBGPRouterIDAnnotation is the node's BGP router ID (an IPv4 address),
	// in place of the BGPPeers' routerID and the node's InternalIP.
	NodeBGPRouterIDAnnotation = "vip.paas.org/bgp-router-id"
	// NodeBGPSourceAddressAnnotation is the address the node's sessions leave
	// from: comma-separated, at most one per family, each an address of one
	// of the node's own interfaces; a session to a router of the other
	// family keeps the kernel's choice.
	NodeBGPSourceAddressAnnotation = "vip.paas.org/bgp-source-address"
)
