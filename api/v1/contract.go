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
	// SharingKeyAnnotation lets Services share one address: those carrying the
	// same key in one namespace get the same address when their ports
	// (protocol and port) do not collide (docs/api.md, "Shared addresses").
	SharingKeyAnnotation = "vip.paas.org/sharing-key"
	// SharingCrossNamespaceAnnotation lists the other namespaces (comma-separated,
	// or "*" for all) whose Services with the same sharing key may share the
	// address; both sides must list each other. Modelled on Cilium's.
	SharingCrossNamespaceAnnotation = "vip.paas.org/sharing-cross-namespace"
)

// Other implementations' sharing annotations, honoured as SharingKeyAnnotation
// and SharingCrossNamespaceAnnotation so that manifests written for them work
// unchanged. A Service carrying several must give them one value.
const (
	MetalLBSharingAnnotation              = "metallb.io/allow-shared-ip"
	MetalLBLegacySharingAnnotation        = "metallb.universe.tf/allow-shared-ip"
	CiliumSharingKeyAnnotation            = "lbipam.cilium.io/sharing-key"
	CiliumSharingCrossNamespaceAnnotation = "lbipam.cilium.io/sharing-cross-namespace"
)

// MaxSharers is how many Services may hold one shared address (the ledger's
// spec.owner and spec.sharedWith together).
const MaxSharers = 100

// MaxSharedPorts is how many ports (protocol and number) the Services holding
// one shared address may expose together.
const MaxSharedPorts = 4096

// MetalLB's Service annotations, honoured as ours so that Services written for MetalLB need no
// edit when it is replaced (docs/migration.md "From MetalLB"): each list is in precedence order
// after our own key, and two keys of one list that disagree are refused (InvalidRequest).
var (
	// IPsAnnotationAliases ask for addresses as IPsAnnotation does.
	IPsAnnotationAliases = []string{"metallb.io/loadBalancerIPs", "metallb.universe.tf/loadBalancerIPs"}
	// IPGroupAnnotationAliases name a pool; the IPGroup converted from it has its name.
	IPGroupAnnotationAliases = []string{"metallb.io/address-pool", "metallb.universe.tf/address-pool"}
)

// EventAddressNotAdopted is the reason of the Warning Event on a Service whose status showed an
// address with no ledger object (written by another load balancer, such as MetalLB, before
// this operator served the Service) that the operator could not adopt: the message names the
// address and why (no IPGroup admitting the Service allows it, another Service holds it, ...).
const EventAddressNotAdopted = "AddressNotAdopted"

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
	// ReasonRequestedIPReserved: the requested address is reserved in the
	// cluster (a Node's address, a Service CIDR, a pod CIDR, or the network or
	// broadcast address of a subnet an L2 group announces on); the message
	// names what holds it.
	ReasonRequestedIPReserved = "RequestedIPReserved"
	// ReasonRequestedIPLeased: the requested address was released by a
	// Service that had asked for it by name, and is kept for that Service, in
	// case it is created again, until the time the message gives; the message
	// does not name that Service.
	ReasonRequestedIPLeased = "RequestedIPLeased"
	// ReasonRequestedIPInUseOnLAN: a host on the LAN answered for the
	// requested address when the node that was to announce it probed it
	// first; the message names its MAC and since when. The Service waits
	// until the address is free (see the IP object's InUseOnLAN condition).
	ReasonRequestedIPInUseOnLAN = "RequestedIPInUseOnLAN"
	// ReasonSharedPortCollision: the Service carries a sharing key, but a
	// Service already holding the key's address uses one of its ports (same
	// protocol and port); the message names that Service and the port.
	ReasonSharedPortCollision = "SharedPortCollision"
	// ReasonSharedEndpointsDiffer: the Service and a Service holding the
	// key's address both have externalTrafficPolicy Local but different
	// selectors, so no node may have local endpoints of both.
	ReasonSharedEndpointsDiffer = "SharedEndpointsDiffer"
	// ReasonSharedIPFull: MaxSharers Services already hold the key's address.
	ReasonSharedIPFull = "SharedIPFull"
	// ReasonSharedTooManyPorts: with the Service's ports, the Services on the
	// key's address would expose more than MaxSharedPorts ports together;
	// the message gives the counts.
	ReasonSharedTooManyPorts = "SharedTooManyPorts"
	// ReasonAddressKept (status True): the Service holds an address its
	// IPGroup no longer allows (excluded, outside its parts, or the group is
	// being deleted) and keeps it, served and announced, until the group's
	// admin releases it (IPGroup annotation vip.paas.org/release-addresses)
	// or the Service asks for another. The group's condition AddressesKept
	// names it too.
	ReasonAddressKept = "AddressKept"
)

// ConditionAddressConflict is the Service condition that says an address the
// Service holds became reserved in the cluster after it was allocated (a Node
// joined with it, a ServiceCIDR or pod CIDR now covers it, a node subnet now
// makes it a network or broadcast address). The Service keeps the address
// (vip.paas.org/IPAllocated stays True) but the agents stop programming and
// announcing it, because the ledger object carries spec.reservedBy, until an
// admin resolves it: frees the address on the other side, or excludes it from
// the IPGroup so the Service is relocated. The condition is present only while
// the conflict lasts.
const ConditionAddressConflict = "vip.paas.org/AddressConflict"

// Reasons of ConditionAddressConflict: what in the cluster holds the address.
const (
	ReasonReservedByNode        = "ReservedByNode"
	ReasonReservedByPodCIDR     = "ReservedByPodCIDR"
	ReasonReservedByServiceCIDR = "ReservedByServiceCIDR"
	ReasonReservedBySubnet      = "ReservedBySubnet"
	// ReasonReservedByGateway: a default gateway a Node's agent publishes
	// (a router on the node's link). A Node's claim: it keeps the address
	// out of new allocations, never from a Service that holds it.
	ReasonReservedByGateway = "ReservedByGateway"
	// ReasonReservedByBGPPeer: the address of a BGPPeer (a router).
	ReasonReservedByBGPPeer = "ReservedByBGPPeer"
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

// ConditionProgrammed is the Service condition the node agents write, and
// only they: present (status False) while the agents refuse to program or
// announce one of the Service's addresses for a reason every agent sees alike
// (a Node's address, an address the ledger does not give the Service, source
// ranges that do not parse); absent once every address is programmed. The
// operator never writes it, and the agents write no other condition. A refusal
// only one node sees (an address of that node's own interfaces) is an Event
// of that node's agent, not this condition: the agents would fight over it.
const ConditionProgrammed = "vip.paas.org/Programmed"

// Reasons of ConditionProgrammed, and of the agents' Warning Events on the
// Service (with ReasonLocalAddress and ReasonNodeAddress, which are Events
// only).
const (
	// ReasonNodeAddress: the address is one of the reporting node's own
	// (its Node's status.addresses); that node's agent neither programs nor
	// announces it, the other nodes carry it.
	ReasonNodeAddress = "NodeAddress"
	// ReasonLocalAddress: the address is on an interface of the reporting
	// node; that node's agent neither programs nor announces it.
	ReasonLocalAddress = "LocalAddress"
	// ReasonNotInLedger: the address is in the Service status, but its ledger
	// IP object is missing or names another Service (by uid): the status was
	// not written by the operator, and the agents trust the ledger.
	ReasonNotInLedger = "NotInLedger"
	// ReasonReserved: the operator marked the address's ledger object reserved
	// (IP spec.reservedBy): something else in the cluster came to hold it after
	// it was allocated (see ConditionAddressConflict).
	ReasonReserved = "Reserved"
	// ReasonInvalidSourceRanges: an entry of spec.loadBalancerSourceRanges does
	// not parse as a CIDR; the agents admit no client at all to the Service's
	// addresses (fail closed) until it is fixed.
	ReasonInvalidSourceRanges = "InvalidSourceRanges"
)

// FieldOwner is the field manager of every write the operator (and its
// migration) makes.
const FieldOwner = client.FieldOwner("vip-allocator-operator")

// DefaultNamespace is the operator's namespace when it runs outside a pod
// (tests, the demo): the bundle installs it there. The agents read their
// Secrets from the operator's namespace.
const DefaultNamespace = "vip-allocator-operator"

// The Secrets the operator writes, in its namespace, for the agents: the only
// Secrets it may create or change (config/admission/operator_secret_writes.yaml).
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
	// name in passwordSecret. It is also the only record of the password last
	// copied for each peer, which the operator keeps when the peer's own
	// Secret goes away: the operator reads it back, so a restart forgets none.
	BGPPasswordsSecret = "vip-allocator-bgp-passwords"
	// BGPPasswordLabel marks a Secret a BGPPeer's passwordSecret may name
	// (value "true"): the operator copies a password only out of a Secret
	// made for it, never out of any Secret of its namespace (the gossip key).
	BGPPasswordLabel = "vip.paas.org/bgp-password"
)

// The agent's default ports, which the DaemonSet the operator deploys relies on:
// metrics over TLS for authorized callers on every address (the Prometheus
// convention for node agents), health on the host's loopback only, where the
// kubelet probes it. The liveness gossip (--memberlist-port) binds UDP and TCP
// on the node's address; it is memberlist's usual port, which MetalLB's
// speakers use too, so the MetalLB migration checks it.
const (
	AgentMetricsPort    = 9478
	AgentProbePort      = 9479
	AgentMemberlistPort = 7946
)

// AgentDaemonSet is the name of the agent DaemonSet the operator deploys in
// its namespace.
const AgentDaemonSet = "vip-allocator-agent"

// Events on a ValidatingAdmissionPolicy or binding of config/admission, from
// the operator's check under OLM (--admission-policies); the involved object
// names it even when it is missing.
const (
	// EventAdmissionPolicyMissing (Warning): no such object in the cluster.
	EventAdmissionPolicyMissing = "AdmissionPolicyMissing"
	// EventAdmissionPolicyAltered (Warning): its spec differs from the shipped one.
	EventAdmissionPolicyAltered = "AdmissionPolicyAltered"
	// EventAdmissionPolicyInForce (Normal): it is back as shipped.
	EventAdmissionPolicyInForce = "AdmissionPolicyInForce"
)
