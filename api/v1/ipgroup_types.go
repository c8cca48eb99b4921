package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AnnounceMode says how the VIPs of a group are made reachable from outside.
// +kubebuilder:validation:Enum=L2;BGP;None
type AnnounceMode string

const (
	// AnnounceL2 answers ARP/NDP for each VIP from one owner node.
	AnnounceL2 AnnounceMode = "L2"
	// AnnounceBGP advertises each VIP as a host route from every eligible node.
	AnnounceBGP AnnounceMode = "BGP"
	// AnnounceNone leaves reachability to static routes in the network.
	AnnounceNone AnnounceMode = "None"
)

// IPGroupSpec is a pool: a CIDR segment minus excluded addresses, and who may use it.
// +kubebuilder:validation:XValidation:rule="!isCIDR(self.segment) || !has(self.excludedIPs) || self.excludedIPs.all(e, isIP(e) ? cidr(self.segment).containsIP(e) : (isCIDR(e) && cidr(self.segment).ip().family() == cidr(e).ip().family() && (cidr(self.segment).containsCIDR(e) || cidr(e).containsCIDR(self.segment))))",message="every excludedIPs entry must be inside the segment (an IP, or a CIDR of the segment's family that overlaps it)"
type IPGroupSpec struct {
	// Segment is the CIDR the group hands addresses out of, IPv4 or IPv6, written
	// as its network address, e.g. 192.0.2.0/24 or 2001:db8:1::/64.
	// +required
	// +kubebuilder:validation:MaxLength=64
	// +kubebuilder:validation:XValidation:rule="isCIDR(self)",message="segment must be a CIDR such as 192.0.2.0/24 or 2001:db8::/64 (IPv4-mapped IPv6 such as ::ffff:c000:200/120 is not accepted: write the IPv4 segment)"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || cidr(self) == cidr(self).masked()",message="segment must be written as its network address (host bits zero), e.g. 192.0.2.0/24"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (cidr(self).ip().family() == 4 ? cidr(self).prefixLength() >= 8 : cidr(self).prefixLength() >= 16)",messageExpression="'segment ' + self + ' is too wide to be a VIP pool: the shortest prefix is /8 for IPv4 and /16 for IPv6; split it into smaller groups such as 10.0.0.0/8'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (!cidr(self).containsIP('0.0.0.0') && !cidr(self).containsIP('::') && !cidr('0.0.0.0/8').containsCIDR(self))",messageExpression="'segment ' + self + ' holds the unspecified address (0.0.0.0/8 or ::), which no host can be reached at; use a routable segment such as 192.0.2.0/24 or 2001:db8::/64'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (!cidr('127.0.0.0/8').containsCIDR(self) && !cidr(self).containsIP('::1'))",messageExpression="'segment ' + self + ' holds loopback addresses (127.0.0.0/8 or ::1), which every node answers itself; use a routable segment such as 192.0.2.0/24'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (!cidr('224.0.0.0/4').containsCIDR(self) && !cidr(self).containsCIDR('224.0.0.0/4') && !cidr('ff00::/8').containsCIDR(self))",messageExpression="'segment ' + self + ' holds multicast addresses (224.0.0.0/4 or ff00::/8), which are never a unicast VIP; use a routable segment such as 192.0.2.0/24'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (!cidr('169.254.0.0/16').containsCIDR(self) && !cidr(self).containsCIDR('169.254.0.0/16') && !cidr('fe80::/10').containsCIDR(self))",messageExpression="'segment ' + self + ' holds link-local addresses (169.254.0.0/16, with the cloud metadata address, or fe80::/10), which routers never forward; use a routable segment such as 192.0.2.0/24'"
	// +kubebuilder:validation:XValidation:rule="!isCIDR(self) || (!cidr(self).containsIP('255.255.255.255'))",messageExpression="'segment ' + self + ' holds the limited broadcast address 255.255.255.255, which every host on the link receives; use a routable segment such as 192.0.2.0/24'"
	// +kubebuilder:validation:XValidation:rule="!(self.contains(':') && self.contains('.'))",messageExpression="'segment ' + self + ' is an IPv4-mapped (or -compatible) IPv6 prefix, which IPv6 never routes to a host; write the IPv4 segment itself, such as 192.0.2.0/24'"
	Segment string `json:"segment"`

	// ExcludedIPs are never handed out: single IPs, or CIDRs for ranges.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=1024
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule="isIP(self) || isCIDR(self)",message="excludedIPs entries must be IPs or CIDRs"
	ExcludedIPs []string `json:"excludedIPs,omitempty"`

	// AutoAssign lets Services that name no group get addresses from this one.
	// Services can still name the group or request one of its addresses when false.
	// +optional
	// +kubebuilder:default=true
	AutoAssign *bool `json:"autoAssign,omitempty"`

	// Priority orders the auto-assign groups: lower is tried first, ties by name.
	// +optional
	// +kubebuilder:default=0
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=1000000
	Priority int32 `json:"priority,omitempty"`

	// NamespaceSelector limits the group to Services in matching namespaces.
	// Empty or absent: every namespace.
	// +optional
	NamespaceSelector *metav1.LabelSelector `json:"namespaceSelector,omitempty"`

	// ServiceSelector limits the group to Services whose labels match.
	// Empty or absent: every Service.
	// +optional
	ServiceSelector *metav1.LabelSelector `json:"serviceSelector,omitempty"`

	// Announce says how the group's VIPs are made reachable from outside the nodes.
	// +optional
	// +kubebuilder:default={}
	Announce *Announce `json:"announce,omitempty"`
}

// Announce configures how a group's VIPs are announced.
type Announce struct {
	// Mode is L2 (ARP/NDP from one owner node per VIP), BGP (host routes from
	// every eligible node) or None (the network routes the segment statically).
	// +optional
	// +kubebuilder:default=L2
	Mode AnnounceMode `json:"mode,omitempty"`

	// NodeSelector picks the nodes that may carry the group's VIPs, e.g. the
	// nodes on the L2 segment of the group. Absent: every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// Interfaces restricts L2 announcement to these interface names.
	// Absent: any interface with an address on the VIP's subnet.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:MaxLength=15
	Interfaces []string `json:"interfaces,omitempty"`

	// BGP settings, used when Mode is BGP.
	// +optional
	BGP *BGPAnnounce `json:"bgp,omitempty"`
}

// BGPAnnounce configures the BGP advertisement of a group's VIPs.
type BGPAnnounce struct {
	// Peers are names of BGPPeer objects to advertise to. Absent: every peer.
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=64
	// +kubebuilder:validation:items:MaxLength=253
	Peers []string `json:"peers,omitempty"`

	// Communities attached to the routes: standard (65000:100) or large (65000:1:2).
	// +optional
	// +listType=set
	// +kubebuilder:validation:MaxItems=32
	// +kubebuilder:validation:items:Pattern=`^[0-9]+:[0-9]+(:[0-9]+)?$`
	// +kubebuilder:validation:items:MaxLength=32
	// +kubebuilder:validation:XValidation:rule="self.all(c, c.split(':').size() == 3 ? c.split(':').all(p, int(p) <= 4294967295) : c.split(':').all(p, int(p) <= 65535))",message="a standard community is two numbers of at most 65535 (65000:100); a large one three of at most 4294967295 (65000:1:2)"
	Communities []string `json:"communities,omitempty"`

	// LocalPref attached to the routes (iBGP only).
	// +optional
	LocalPref *uint32 `json:"localPref,omitempty"`
}

// Condition types of an IPGroup.
const (
	// IPGroupReady is True when the group's spec was accepted and it can hand out addresses.
	IPGroupReady = "Ready"
	// IPGroupOverlapping is True when the segment overlaps another group's.
	IPGroupOverlapping = "Overlapping"
	// IPGroupAnnounceable is True when at least one node can announce the
	// group's VIPs in L2 mode (it matches announce.nodeSelector and has an
	// interface on the segment). False means its Services get IPs nobody
	// outside the nodes can reach.
	IPGroupAnnounceable = "Announceable"
)

// IPGroupStatus reports how full the group is and whether it is usable.
type IPGroupStatus struct {
	// Capacity is the number of addresses the group can hand out (the segment
	// minus the excluded addresses). A decimal string: an IPv6 /64 holds 2^64.
	// +optional
	Capacity string `json:"capacity,omitempty"`

	// Allocated is the number of the group's addresses held by Services or legacy VirtualIPs.
	// +optional
	Allocated int64 `json:"allocated"`

	// Available is Capacity minus Allocated minus the reserved addresses no
	// Service holds, as a decimal string.
	// +optional
	Available string `json:"available,omitempty"`

	// Reserved is the number of the group's addresses it does not hand out
	// because they are reserved in the cluster: Nodes' addresses, Service
	// CIDRs, pod CIDRs and, for an L2 group, the network and broadcast
	// addresses of the node subnets it announces on. A decimal string, like
	// Capacity; Available excludes them.
	// +optional
	Reserved string `json:"reserved,omitempty"`

	// Relocating counts the Services (or legacy VirtualIPs) holding an address
	// that the ledger records as this group's but that the group no longer
	// allows: its segment or excludedIPs changed and they have not moved yet.
	// It is 0 once a relocation is complete; each such Service's condition
	// vip.paas.org/IPAllocated says why it has not moved.
	// +optional
	Relocating int64 `json:"relocating"`

	// ObservedGeneration is the spec generation the status describes.
	// +optional
	ObservedGeneration int64 `json:"observedGeneration,omitempty"`

	// Conditions: Ready, Overlapping, Announceable.
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
}

// IPGroup is a pool of addresses for LoadBalancer Services: a CIDR segment minus
// excluded IPs.
//
// The name is the ledger's ipgroup label value, so it must fit one.
// +kubebuilder:validation:XValidation:rule="self.metadata.name.size() <= 63",message="an IPGroup name is at most 63 characters: it is the value of the ipgroup label on every IP ledger object of the group"
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster,shortName=ipg
// +kubebuilder:printcolumn:name="Segment",type=string,JSONPath=`.spec.segment`
// +kubebuilder:printcolumn:name="Mode",type=string,JSONPath=`.spec.announce.mode`
// +kubebuilder:printcolumn:name="Allocated",type=integer,JSONPath=`.status.allocated`
// +kubebuilder:printcolumn:name="Capacity",type=string,JSONPath=`.status.capacity`
// +kubebuilder:printcolumn:name="Ready",type=string,JSONPath=`.status.conditions[?(@.type=="Ready")].status`
// +kubebuilder:printcolumn:name="Relocating",type=integer,JSONPath=`.status.relocating`
// +kubebuilder:printcolumn:name="Reserved",type=string,JSONPath=`.status.reserved`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type IPGroup struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec   IPGroupSpec   `json:"spec"`
	Status IPGroupStatus `json:"status,omitempty"`
}

// IPGroupList is a list of IPGroups.
// +kubebuilder:object:root=true
type IPGroupList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []IPGroup `json:"items"`
}

func init() {
	SchemeBuilder.Register(&IPGroup{}, &IPGroupList{})
}
