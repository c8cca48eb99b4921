package dataplane

import (
	"net/netip"
	"time"
)

// Family is an IP family; one Plane programs one family.
type Family string

// The two families.
const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

// Protocol is a Service port protocol: "TCP", "UDP" or "SCTP". Empty means TCP, as in Kubernetes.
type Protocol string

// The protocols a Service port carries.
const (
	TCP  Protocol = "TCP"
	UDP  Protocol = "UDP"
	SCTP Protocol = "SCTP"
)

// Port is one Service port exposed on the VIPs.
type Port struct {
	Name     string
	Protocol Protocol
	Port     uint16
}

// EndpointPort is a port of an endpoint, from its EndpointSlice (matched to a Service port by
// Name and Protocol).
type EndpointPort struct {
	Name     string
	Protocol Protocol
	Port     uint16
}

// Endpoint is one ready endpoint.
type Endpoint struct {
	Addr  netip.Addr
	Local bool // runs on this node
	// Node is the node the endpoint runs on ("" when its EndpointSlice does not say): steering
	// weighs each node by its endpoints.
	Node  string
	Ports []EndpointPort
}

// Service is one LoadBalancer Service as the data plane needs it.
type Service struct {
	Namespace, Name string
	VIPs            []netip.Addr // both families may appear; a Plane uses only its own family
	Ports           []Port
	Local           bool           // externalTrafficPolicy: Local
	SourceRanges    []netip.Prefix // loadBalancerSourceRanges; empty = everyone (unless Closed)
	// Closed admits nobody: loadBalancerSourceRanges has an entry that does not parse. Its VIPs
	// are rejected on every port, whatever SourceRanges holds: an allow-list we cannot read
	// must not widen to what we can.
	Closed    bool
	Endpoints []Endpoint // ready endpoints (both families may appear)
	// Affinity is sessionAffinity ClientIP: a client's new connections to a Service port go
	// to the endpoint it last used, until Affinity has passed since its last new connection.
	// Zero means none.
	Affinity time.Duration
	// Steer sends each flow, on whichever node it enters by, to the serving node the
	// consistent steering table picks, where it is DNATed to that node's own endpoints
	// (steering.go). False keeps the entry node's DNAT to any endpoint. Only a plane given its
	// peers (Steerer) steers.
	Steer bool
}

// Config selects the family, the plane, the masquerade mark and, for tests, the iptables backend.
type Config struct {
	Family Family
	// Plane is PlaneAuto (or empty), PlaneNFTables or PlaneIPTables; only Open reads it.
	Plane string
	// MasqueradeBit is the bit of the packet mark that asks for masquerade; 0 means 21
	// (mark 0x200000). kube-proxy uses bits 14 and 15, which are refused.
	MasqueradeBit int
	// Backend overrides detection for tests: "", "nft" or "legacy"; empty = detect.
	Backend string
}

// SyncStats describes one Sync.
type SyncStats struct {
	Rules    int           // rules written (iptables-restore payload, or nftables rules)
	Elements int           // nftables set and map elements added or deleted
	Chains   int           // chains declared (written or deleted) in the payload
	Full     bool          // everything was rewritten and stale chains looked up
	Duration time.Duration // listing (full only), planning, writing and iptables-restore
}
