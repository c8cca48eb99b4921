package v1

import "sigs.k8s.io/controller-runtime/pkg/client"

// The contract the operator, the migration and the node agents share beyond
// the kinds of this package: the Service interface (class, annotations,
// conditions), the field owner, and the Secrets the operator fills for the
// agents. Each side imports it from here, never from another side.

// LoadBalancerClass is the spec.loadBalancerClass vip-allocator answers to
// (internal/lbclass decides from it which Services are ours).
const LoadBalancerClass = "paas.org/vip-allocator"

// Annotations a Service may carry to steer its allocation.
const (
	// IPsAnnotation asks for addresses: comma-separated, one per family.
	IPsAnnotation = "vip.paas.org/ips"
	// IPGroupAnnotation names the IPGroups (comma-separated) the Service may get addresses from.
	IPGroupAnnotation = "vip.paas.org/ipgroup"
)

// CreatedFromGSMLabel on an IPGroup names the GroupSegmentMapping the
// migration made it from.
const CreatedFromGSMLabel = "vip.paas.org/created-from-gsm"

// ConditionIPAllocated is the Service condition that says whether, and why not,
// the Service holds its addresses.
const ConditionIPAllocated = "vip.paas.org/IPAllocated"

// Reasons of ConditionIPAllocated: API constants a person or a tool can match on.
const (
	ReasonAllocated                = "Allocated"
	ReasonNoIPGroup                = "NoIPGroup"
	ReasonIPGroupFull              = "IPGroupFull"
	ReasonRequestedIPInUse         = "RequestedIPInUse"
	ReasonRequestedIPExcluded      = "RequestedIPExcluded"
	ReasonRequestedIPOutsideGroups = "RequestedIPOutsideGroups"
	ReasonGroupNotAllowed          = "GroupNotAllowed"
	ReasonInvalidRequest           = "InvalidRequest"
)

// ConditionAnnounced is the Service condition that says which node(s) make its
// addresses reachable from outside the cluster, or why none does. The
// migration waits for it to be True, when a Service has it, before the
// keepalived clone goes.
const ConditionAnnounced = "vip.paas.org/Announced"

// Reasons of ConditionAnnounced.
const (
	ReasonAnnounced     = "Announced"
	ReasonNoAnnouncer   = "NoAnnouncer"
	ReasonStaticRouting = "StaticRouting"
)

// FieldOwner is the field manager of every write the operator (and its
// migration) makes.
const FieldOwner = client.FieldOwner("vip-allocator-operator")

// DefaultNamespace is the operator's namespace when it runs outside a pod
// (tests, the demo): the bundle installs it there. The agents read their
// Secrets from the operator's namespace.
const DefaultNamespace = "vip-allocator-operator"

// The Secrets the operator fills, in its namespace, for the agents.
const (
	// MemberlistSecret holds the key that authenticates (and encrypts) the
	// agents' liveness gossip; the operator creates it once, never rotates it
	// by itself.
	MemberlistSecret = "vip-allocator-memberlist"
	// MemberlistKey is MemberlistSecret's data key: 32 random bytes (AES-256).
	MemberlistKey = "key"
	// MemberlistKeys, when present, replaces MemberlistKey: the keys for a
	// rotation, base64, one per line, the primary (the one agents encrypt
	// with) first; agents decrypt with any of them (docs/operations.md).
	MemberlistKeys = "keys"
	// BGPPasswordsSecret is the Secret into which the operator copies each
	// BGPPeer's TCP MD5 password (key: the peer's name). Agents may read this
	// one Secret and no other: they never need access to the Secrets users
	// name in passwordSecret.
	BGPPasswordsSecret = "vip-allocator-bgp-passwords"
)
