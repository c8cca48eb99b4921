// Package agentfacts is the contract between a node agent and
// `vip-allocator explain`: what an agent tells about its own node (its view
// of the other agents, what its kernel holds for some VIPs, which VIPs it
// answers for), on which path of its metrics server, and how a caller
// presents its token there. The agent only reads to answer; nothing a caller
// sends changes what the agent does.
package agentfacts

import "time"

// Path is the read-only debug path on the agent's metrics server. The
// metrics server authorizes it as it does /metrics (internal/metricsauth): a
// caller needs `get` on this non-resource URL, which ReaderClusterRole grants.
const Path = "/debug/vips"

// ReaderClusterRole grants `get` on Path (config/rbac/debug_reader_role.yaml).
const ReaderClusterRole = "vip-allocator-debug-reader"

// ExplainServiceAccount is the ServiceAccount, in the operator's namespace,
// bound to ReaderClusterRole: explain asks the API server for a short-lived
// token of it (TokenRequest) and presents that to the agents, so no person's
// own credentials ever reach a node.
const ExplainServiceAccount = "vip-allocator-explain"

// ExplainAudience is the one audience of an explain token: the operator's
// admission policy (config/admission/explain_token.yaml) holds every
// TokenRequest of ExplainServiceAccount to it and to ExplainTokenSeconds,
// whoever asks, and the agents accept on Path only tokens for it. Such a
// token is worth nothing to the API server itself.
const ExplainAudience = "vip-allocator-agent-facts"

// ExplainTokenSeconds is the lifetime of an explain token.
const ExplainTokenSeconds = 600

// Service is the Service in the operator's namespace in front of the agents'
// metrics port: explain reaches the agents through the API server's
// services/proxy on it (the explainer may proxy to no other Service, and to
// no pod), asking the agent it lands on for NodeParam's facts, which that
// agent forwards to the node named.
const Service = "vip-allocator-agent-facts"

// NodeParam names the node whose facts are asked (absent: the agent's own).
const NodeParam = "node"

// VIPParam is the query parameter naming a VIP to report on (repeated); the
// data path of no other VIP is read.
const VIPParam = "vip"

// MaxVIPs bounds the VIPs one request may ask about: each is a kernel read.
const MaxVIPs = 64

// Facts is what an agent reports of its node.
type Facts struct {
	// Node is the agent's node.
	Node string `json:"node"`
	// At is when the agent read them.
	At time.Time `json:"at"`
	// OnCordon is the agent's --on-cordon (handover or keep).
	OnCordon string `json:"onCordon"`
	// Alive maps every agent this one sees alive in the gossip, itself
	// included, to whether it is draining.
	Alive map[string]bool `json:"alive"`
	// Planes are the node's data planes, one per family.
	Planes []Plane `json:"planes"`
	// Ports are what the kernel holds for the VIPs asked about: one entry
	// per VIP, protocol and port with endpoints.
	Ports []Port `json:"ports"`
	// Answering are the VIPs this node answers ARP or NDP for, by interface.
	Answering map[string]string `json:"answering"`
	// Announced is, for each VIP asked about that it answers for, when its
	// last gratuitous ARP (IPv6: unsolicited Neighbor Advertisement) was sent.
	Announced map[string]time.Time `json:"announced,omitempty"`
	// Advertised are, by BGPPeer name, the VIPs asked about that are in
	// that session's Adj-RIB-Out (sent to the router); empty when the node
	// speaks BGP with no one.
	Advertised map[string][]string `json:"advertised,omitempty"`
	// Errors are what could not be read (the BGP speaker's routes).
	Errors []string `json:"errors,omitempty"`
}

// Plane is one family's data plane.
type Plane struct {
	Family  string `json:"family"`
	Backend string `json:"backend"`
	// Error is why its kernel state could not be read ("" when it was).
	Error string `json:"error,omitempty"`
}

// Port is one Service port of a VIP as the kernel holds it.
type Port struct {
	VIP      string `json:"vip"`
	Protocol string `json:"protocol"`
	Port     int32  `json:"port"`
	// Endpoints are address:port, sorted, as the kernel DNATs to them.
	Endpoints []string `json:"endpoints"`
}
