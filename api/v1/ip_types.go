package v1

import (
	"net/netip"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// Ledger labels and annotations, kept from the original operator so its objects
// and tools keep working.
const (
	// IPGroupLabel names the IPGroup an IP object's address belongs to.
	IPGroupLabel = "ipgroup"
	// LegacyGSMLabel names the GroupSegmentMapping of a legacy IP object.
	LegacyGSMLabel = "gsm"
	// OwnerAnnotation is "<namespace>/<name>" of the holder (a Service, or a
	// VirtualIP for legacy objects). The key is the original's, typo and all.
	OwnerAnnotation = "virtualips.paas.il/owner"
)

// IPOwner names the Service an address is allocated to.
type IPOwner struct {
	// +required
	// +kubebuilder:validation:MaxLength=63
	Namespace string `json:"namespace"`
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// UID of the Service: the ledger entry is garbage once no Service has it.
	// +required
	UID types.UID `json:"uid"`
}

// IPSpec records one allocation.
type IPSpec struct {
	// Address is the allocated IP, as written in the Service status.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="address must be an IP"
	Address string `json:"address,omitempty"`
	// IPGroup the address was allocated from.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	IPGroup string `json:"ipGroup,omitempty"`
	// Owner is the Service holding the address (the first of them when it is
	// shared). Legacy objects have none and name their VirtualIP in the
	// virtualips.paas.il/owner annotation.
	// +optional
	Owner *IPOwner `json:"owner,omitempty"`
	// SharingKey is the sharing key (vip.paas.org/sharing-key or an alias) of
	// the Services holding the address; empty when it is not shared.
	// +optional
	// +kubebuilder:validation:MaxLength=63
	SharingKey string `json:"sharingKey,omitempty"`
	// SharedWith are the Services other than Owner holding the address under
	// SharingKey, in the order they joined. When Owner leaves, the first of
	// them becomes Owner; the address is released when the last one leaves.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=99
	SharedWith []IPOwner `json:"sharedWith,omitempty"`
	// ReservedBy, when set, says what else in the cluster holds the address,
	// e.g. "the address of Node node1": it became reserved after it was
	// allocated. The Service keeps it (and carries the condition
	// vip.paas.org/AddressConflict), but no agent programs or announces an
	// address whose ledger object has ReservedBy set. The operator sets and
	// clears it; it lives in the spec so that only the operator writes it.
	// +optional
	// +kubebuilder:validation:MaxLength=512
	ReservedBy string `json:"reservedBy,omitempty"`
	// AwaitingDataPath is set on an address adopted from another load
	// balancer's Service status while kube-proxy (ipMode VIP) still forwards
	// it: the agents program it already, and the operator writes ipMode Proxy,
	// which makes kube-proxy let go of it, only once the nodes announcing it
	// report it in their data path (status.programmedBy); then it clears this.
	// The operator sets and clears it.
	// +optional
	AwaitingDataPath bool `json:"awaitingDataPath,omitempty"`
	// AdoptedFromNode is the node that answered ARP/NDP for an adopted
	// address for the load balancer it was adopted from (MetalLB's
	// ServiceL2Status), as the operator read it at the adoption. On layer 2
	// the agents elect that node while it may carry the address, so the
	// hand-over moves no neighbour entry on the LAN: both speakers answer
	// with the same MAC. The operator clears it once another node announces
	// the address, which then stays where the election puts it.
	// +optional
	// +kubebuilder:validation:MaxLength=253
	AdoptedFromNode string `json:"adoptedFromNode,omitempty"`
}

// IPStatus mirrors the owner and reports where the address is announced.
type IPStatus struct {
	// Owner is the Service holding the address, as last confirmed by the operator.
	// +optional
	Owner *IPOwner `json:"owner,omitempty"`
	// AnnouncedBy names the node(s) announcing the address: the one owner in
	// L2 mode. Written by the announcing agent when it takes the address over.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=5000
	AnnouncedBy []string `json:"announcedBy,omitempty"`
	// ProgrammedBy names the nodes whose data path carries the address,
	// each written by that node's agent, while spec.awaitingDataPath is set:
	// the operator writes ipMode Proxy once every node of AnnouncedBy is
	// among them (docs/migration.md, "The hand-over on the wire").
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=5000
	ProgrammedBy []string `json:"programmedBy,omitempty"`
	// Conditions: Conflict (another MAC answers for the address the cluster
	// announces), InUseOnLAN (a host answered the probe the L2 owner sends
	// before announcing the address for the first time).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
	// History are the last changes of the node(s) announcing the address,
	// oldest first. Layer 2: each ownership change, written by the agent that
	// took the address over, in the same write that names it in
	// AnnouncedBy; the first announcement of an address is none. BGP: each
	// change of the advertisers, written in the write that makes it: a node
	// that starts advertising records its join (From empty), a node that
	// stops records its leave (To empty), and the agent that prunes the
	// advertisers records each node it drops (a dead one included). The
	// agents keep the last 10 (--failover-history).
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=32
	History []Failover `json:"history,omitempty"`
}

// Failover is one change of the node announcing an address (layer 2), or of
// the set of nodes advertising it (BGP: one node joining or leaving).
type Failover struct {
	// At is when the writing agent noticed the change: the first event
	// (the agents' liveness, a Node, the Services, the BGP sessions) of the
	// pass that decided it.
	// +required
	At metav1.Time `json:"at"`
	// From is the node that announced the address before; empty for a BGP
	// node joining the advertisers.
	// +required
	// +kubebuilder:validation:MaxLength=253
	From string `json:"from"`
	// To is the node that announces it now, the one that wrote the entry;
	// empty for a BGP node leaving the advertisers (From).
	// +required
	// +kubebuilder:validation:MaxLength=253
	To string `json:"to"`
	// Cause is why the address moved, as the writer's election saw it. For a
	// BGP join it is ElectionChange; for a BGP leave, the leaving node's
	// state (ElectionChange for one alive and eligible: its Service's
	// endpoints left it, or its sessions to the group's peers are down).
	// +required
	Cause FailoverCause `json:"cause"`
	// GapMilliseconds, layer 2: the time from At to the new owner's first
	// gratuitous ARP (IPv6: unsolicited Neighbor Advertisement) for the
	// address; absent when that announcement was not seen sent in time (its
	// send failed). BGP: the time from At to the return of the writing
	// node's GoBGP call that advertised its route (join), or withdrew it or
	// marked it for graceful shutdown (leave): the route handed to the
	// node's BGP speaker, not yet received by the routers; absent for a node
	// pruned by another (its routes go when its sessions do, which only the
	// routers see) and for a join or leave that followed no change of the
	// route (its session came up or went down). Neither leaves in how long a
	// dead node's death took to be noticed (see docs/troubleshooting.md).
	// +optional
	// +kubebuilder:validation:Minimum=0
	GapMilliseconds *int64 `json:"gapMilliseconds,omitempty"`
}

// FailoverCause is why an address moved from one node to another.
// +kubebuilder:validation:Enum=OwnerDead;PlannedMove;Excluded;Conflict;ElectionChange
type FailoverCause string

const (
	// FailoverOwnerDead means the previous owner's agent is no longer alive (killed,
	// its node down, its link down, or on the minority side of a split).
	FailoverOwnerDead FailoverCause = "OwnerDead"
	// FailoverPlannedMove means the previous owner's agent is stopping and hands
	// its addresses over (draining).
	FailoverPlannedMove FailoverCause = "PlannedMove"
	// FailoverExcluded means the previous owner is alive but excluded from carrying
	// addresses (the exclusion label, or cordoned under --on-cordon=handover).
	FailoverExcluded FailoverCause = "Excluded"
	// FailoverConflict means the ledger named an announcer the election did not
	// give the address to (two nodes claimed it); the election's owner ends it.
	FailoverConflict FailoverCause = "Conflict"
	// FailoverElectionChange means the previous owner is alive and eligible, but
	// the election now gives the address to another node (a node came back,
	// the Service's endpoints or the group's node selection changed).
	FailoverElectionChange FailoverCause = "ElectionChange"
)

// IP condition types and reasons.
const (
	// IPConditionConflict is True while another host claims the address on
	// its layer-2 segment: two machines answer ARP for it.
	IPConditionConflict = "Conflict"
	// ReasonForeignMAC: an ARP packet for the address came from a MAC that is
	// none of the cluster's nodes.
	ReasonForeignMAC = "ForeignMAC"
	// ReasonNoForeignClaim: no foreign claim heard lately.
	ReasonNoForeignClaim = "NoForeignClaim"

	// IPConditionInUseOnLAN is the verdict of the probe the L2 owner sends
	// before it announces an address for the first time (docs/announcement.md,
	// "Probing before the first announcement"). True: a host that is none of
	// the cluster's nodes answered, so the address is in use on the LAN; it is
	// never announced, and the operator gives no Service the address while
	// the condition stands (the message names the MAC and when). False: the
	// probe met silence, and the address may be announced; once False, the
	// address counts as announced, and later owners announce it at once.
	IPConditionInUseOnLAN = "InUseOnLAN"
	// ReasonProbeAnswered: a host answered the probe (InUseOnLAN True).
	ReasonProbeAnswered = "ProbeAnswered"
	// ReasonProbeSilent: nothing answered the probe (InUseOnLAN False).
	ReasonProbeSilent = "ProbeSilent"
)

// IP is one entry of the allocation ledger: one object per allocated address,
// named by the address (IPv6 with '-' for ':'). Creating it is the lock that
// keeps two Services, or two operators, from holding one address.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Address",type=string,JSONPath=`.spec.address`
// +kubebuilder:printcolumn:name="IPGroup",type=string,JSONPath=`.metadata.labels.ipgroup`
// +kubebuilder:printcolumn:name="Owner",type=string,JSONPath=`.metadata.annotations.virtualips\.paas\.il/owner`
// +kubebuilder:printcolumn:name="Sharing Key",type=string,JSONPath=`.spec.sharingKey`,priority=1
// +kubebuilder:printcolumn:name="Reserved By",type=string,JSONPath=`.spec.reservedBy`,priority=1
// +kubebuilder:printcolumn:name="Announced By",type=string,JSONPath=`.status.announcedBy[*]`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec IPSpec `json:"spec,omitempty"`
	// +optional
	Status IPStatus `json:"status,omitempty"`
}

// IPList is a list of IPs.
// +kubebuilder:object:root=true
type IPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IP `json:"items"`
}

// Reserved reports whether the address is reserved elsewhere in the cluster
// (spec.reservedBy): agents must neither program nor announce it.
func (ip *IP) Reserved() bool { return ip.Spec.ReservedBy != "" }

// IPObjectName is the ledger object name of addr. Object names may not hold
// ':' and must start and end with a letter or digit, so IPv6 writes each ':'
// as '-' (the original operator's spelling, kept for its ledgers) and a
// leading or trailing "::" gets the zero it stands for: 2001:db8::5 is
// 2001-db8--5, 2001:db8:: is 2001-db8--0, ::1 is 0--1. Addr reads every form.
func IPObjectName(addr netip.Addr) string {
	name := strings.ReplaceAll(addr.Unmap().WithZone("").String(), ":", "-")
	if strings.HasPrefix(name, "-") {
		name = "0" + name
	}
	if strings.HasSuffix(name, "-") {
		name += "0"
	}
	return name
}

// Addr is the address an IP object stands for, from its name; ok is false for a
// name that is no address.
func (ip *IP) Addr() (netip.Addr, bool) {
	addr, err := netip.ParseAddr(strings.ReplaceAll(ip.Name, "-", ":"))
	return addr, err == nil
}

func init() {
	SchemeBuilder.Register(&IP{}, &IPList{})
}
