package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// BGPPeerSpec describes one BGP router the agents of the selected nodes peer with.
//
// +kubebuilder:validation:XValidation:rule="!has(self.holdTime) || duration(self.holdTime) == duration('0s') || duration(self.holdTime) >= duration('3s')",message="holdTime must be 0s (no keepalives) or at least 3s (RFC 4271)"
// +kubebuilder:validation:XValidation:rule="!has(self.holdTime) || !has(self.keepaliveTime) || duration(self.holdTime) == duration('0s') || duration(self.keepaliveTime).getMilliseconds() * 3 <= duration(self.holdTime).getMilliseconds()",message="keepaliveTime must be at most a third of holdTime"
// +kubebuilder:validation:XValidation:rule="self.myASN != self.peerASN || !has(self.ebgpMultiHop) || !self.ebgpMultiHop",message="ebgpMultiHop applies to eBGP only (myASN differs from peerASN)"
// +kubebuilder:validation:XValidation:rule="!has(self.bfd) || !has(self.ebgpMultiHop) || !self.ebgpMultiHop",message="bfd runs on single-hop sessions only (RFC 5881): remove bfd or turn ebgpMultiHop off"
// +kubebuilder:validation:XValidation:rule="has(self.peerAddress) != has(self.interface)",message="set exactly one of peerAddress (a numbered session) and interface (an unnumbered one)"
// +kubebuilder:validation:XValidation:rule="!has(self.interface) || ((!has(self.ebgpMultiHop) || !self.ebgpMultiHop) && !has(self.bfd))",message="an unnumbered session (interface) is single hop and runs without bfd: remove ebgpMultiHop and bfd"
// +kubebuilder:validation:XValidation:rule="!has(self.interfaceRouter) || has(self.interface)",message="interfaceRouter names the router of an unnumbered session: set interface too"
type BGPPeerSpec struct {
	// PeerAddress is the router's IPv4 or IPv6 address. Exactly one of
	// peerAddress and interface is set.
	// +optional
	// +kubebuilder:validation:MaxLength=45
	// +kubebuilder:validation:XValidation:rule="isIP(self)",message="peerAddress must be an IP address, such as 192.0.2.1 or 2001:db8::1"
	PeerAddress string `json:"peerAddress,omitempty"`

	// Interface peers "unnumbered", as FRR's 'neighbor IFACE interface':
	// over the IPv6 link-local addresses of this network interface of each
	// selected node, with the router at the other end of the link found by
	// its IPv6 Router Advertisements (the node sends its own, router
	// lifetime 0, so that the router finds it too). IPv4 VIPs are advertised
	// with the node's IPv6 link-local next hop (RFC 8950, formerly 5549), so
	// the link needs no IPv4 address. The link must be point to point: one
	// router on it: the interface is flagged point to point, or the node
	// knows no other neighbour on it than that router; on any other link
	// name the router (interfaceRouter). Exactly one of peerAddress and
	// interface is set.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:Pattern=`^[a-zA-Z0-9][a-zA-Z0-9_.@-]*$`
	Interface string `json:"interface,omitempty"`

	// InterfaceRouter, with interface, is the IPv6 link-local address of the
	// router at the other end of the link (fe80::1): the unnumbered session
	// goes to it alone, whatever else on the link sends Router
	// Advertisements. Absent: the link must be point to point (interface).
	// +optional
	// +kubebuilder:validation:MaxLength=39
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 6 && cidr('fe80::/10').containsIP(self)",message="interfaceRouter must be an IPv6 link-local address such as fe80::1"
	InterfaceRouter string `json:"interfaceRouter,omitempty"`

	// PeerASN is the router's autonomous system number (1-4294967295).
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	PeerASN int64 `json:"peerASN"`

	// MyASN is the cluster's autonomous system number (1-4294967295); equal to
	// peerASN for iBGP.
	// +required
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=4294967295
	MyASN int64 `json:"myASN"`

	// PeerPort is the router's BGP port.
	// +optional
	// +kubebuilder:default=179
	// +kubebuilder:validation:Minimum=1
	// +kubebuilder:validation:Maximum=65535
	PeerPort int32 `json:"peerPort,omitempty"`

	// HoldTime after which the router drops a silent session (and its routes):
	// how long a dead node's routes outlive it. 0s disables keepalives.
	// +optional
	// +kubebuilder:default="3s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$')",message="holdTime must be a duration such as 3s or 1m30s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$') || duration(self) <= duration('65535s')",message="holdTime must be at most 65535s (BGP carries it as a 16-bit count of seconds)"
	HoldTime *metav1.Duration `json:"holdTime,omitempty"`

	// KeepaliveTime between keepalive messages; at most a third of holdTime.
	// +optional
	// +kubebuilder:default="1s"
	// +kubebuilder:validation:Type=string
	// +kubebuilder:validation:MaxLength=16
	// +kubebuilder:validation:XValidation:rule="self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$')",message="keepaliveTime must be a duration such as 1s"
	// +kubebuilder:validation:XValidation:rule="!self.matches('^([0-9]+([.][0-9]+)?(ms|s|m|h))+$') || duration(self) <= duration('21845s')",message="keepaliveTime must be at most 21845s (a third of the largest holdTime, 65535s)"
	KeepaliveTime *metav1.Duration `json:"keepaliveTime,omitempty"`

	// PasswordSecret names a key of a Secret in the operator's namespace
	// holding the TCP MD5 password (RFC 2385) of the session. The Secret must
	// carry the label vip.paas.org/bgp-password: "true"; the operator copies
	// nothing out of any other (Accepted=False, PasswordSecretNotLabelled).
	// Once a password was copied, the agents keep it when the Secret is
	// deleted, loses its label or its key (Accepted=True,
	// PasswordSecretMissingKeptLastGood or PasswordSecretNotLabelledKeptLastGood):
	// it is dropped only when this field is removed, and replaced only by the
	// password of a valid Secret.
	// +optional
	PasswordSecret *SecretKeyRef `json:"passwordSecret,omitempty"`

	// EBGPMultiHop lets an eBGP session cross routers (TTL 255 instead of 1).
	// +optional
	EBGPMultiHop *bool `json:"ebgpMultiHop,omitempty"`

	// GracefulRestart keeps this node's routes at the router while its agent
	// restarts (RFC 4724, restart time 120s): the router must support it (FRR:
	// bgp graceful-restart). Absent or false: a stopping agent withdraws its
	// routes first, and the router sends the traffic to the other nodes.
	// +optional
	GracefulRestart *bool `json:"gracefulRestart,omitempty"`

	// BFD turns on Bidirectional Forwarding Detection (RFC 5880, single hop
	// per RFC 5881, asynchronous mode, echo off) next to each node's session:
	// when BFD declares the path down, the session is reset at once and the
	// router drops the node's routes in receiveInterval x detectMultiplier
	// (900ms by default) instead of holdTime. The router must run BFD for
	// the node (FRR: bfdd and neighbor ... bfd); one that does not keeps the
	// plain session, and the session's status says so. Absent: no BFD.
	// +optional
	BFD *BFDSettings `json:"bfd,omitempty"`

	// NodeSelector picks the nodes that peer with this router. Absent: every node.
	// +optional
	NodeSelector *metav1.LabelSelector `json:"nodeSelector,omitempty"`

	// RouterID overrides the BGP router ID (an IPv4 address). Absent: the
	// node's IPv4 InternalIP.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	// +kubebuilder:validation:XValidation:rule="isIP(self) && ip(self).family() == 4",message="routerID must be an IPv4 address"
	RouterID string `json:"routerID,omitempty"`
}

// BFDSettings are the timers of a BFD session (RFC 5880), in milliseconds,
// with the bounds FRR's bfdd accepts.
type BFDSettings struct {
	// ReceiveInterval is the minimum interval between the BFD packets this
	// node is able to receive from the router.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	ReceiveInterval *int32 `json:"receiveInterval,omitempty"`

	// TransmitInterval is the minimum interval at which this node wants to
	// send BFD packets to the router.
	// +optional
	// +kubebuilder:default=300
	// +kubebuilder:validation:Minimum=10
	// +kubebuilder:validation:Maximum=60000
	TransmitInterval *int32 `json:"transmitInterval,omitempty"`

	// DetectMultiplier is how many packets in a row may be lost before the
	// path is declared down.
	// +optional
	// +kubebuilder:default=3
	// +kubebuilder:validation:Minimum=2
	// +kubebuilder:validation:Maximum=255
	DetectMultiplier *int32 `json:"detectMultiplier,omitempty"`
}

// SecretKeyRef names one key of a Secret in the operator's namespace.
type SecretKeyRef struct {
	// +required
	// +kubebuilder:validation:MaxLength=253
	Name string `json:"name"`
	// +required
	// +kubebuilder:validation:MaxLength=253
	Key string `json:"key"`
}

// BGPPeerStatus reports whether the agents use the peer and how their sessions are.
type BGPPeerStatus struct {
	// Conditions: Accepted (the peer is valid and used), Established (every
	// node that peers with the router has its session up).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`

	// Sessions has one entry per node that peers with the router, each
	// written by that node's agent.
	// +optional
	// +listType=map
	// +listMapKey=node
	// +kubebuilder:validation:MaxItems=5000
	Sessions []BGPSession `json:"sessions,omitempty"`
}

// BGPSession is one node's session with the peer.
type BGPSession struct {
	// Node whose agent holds the session.
	// +required
	// +kubebuilder:validation:MaxLength=253
	Node string `json:"node"`
	// State of the session (RFC 4271): Idle, Connect, Active, OpenSent,
	// OpenConfirm or Established.
	// +required
	// +kubebuilder:validation:MaxLength=32
	State string `json:"state"`
	// Since is when the session entered State: its uptime when Established.
	// +optional
	Since *metav1.Time `json:"since,omitempty"`
	// PrefixesSent is the number of VIP routes advertised on the session.
	// +optional
	PrefixesSent int32 `json:"prefixesSent,omitempty"`
	// Message says why the session is not established, as last seen by the
	// agent (a refused connection, a notification from the router, ...).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	Message string `json:"message,omitempty"`
	// BFD is the state of the node's BFD session with the router (RFC 5880):
	// Up, Init, Down or AdminDown; NotConfigured when the BGPPeer has no bfd.
	// +optional
	// +kubebuilder:validation:Enum=Up;Init;Down;AdminDown;NotConfigured
	BFD string `json:"bfd,omitempty"`
	// BFDMessage says why BFD is not up, such as a router that sends no BFD
	// packets (it does not run BFD for this node: the session runs without).
	// +optional
	// +kubebuilder:validation:MaxLength=1024
	BFDMessage string `json:"bfdMessage,omitempty"`
	// LocalASN is the ASN the node peers as: the BGPPeer's myASN, or the
	// node's vip.paas.org/bgp-asn annotation.
	// +optional
	// +kubebuilder:validation:Minimum=0
	// +kubebuilder:validation:Maximum=4294967295
	LocalASN int64 `json:"localASN,omitempty"`
	// RouterID is the BGP router ID the node uses: its
	// vip.paas.org/bgp-router-id annotation, else the BGPPeers' routerID,
	// else its IPv4 InternalIP.
	// +optional
	// +kubebuilder:validation:MaxLength=15
	RouterID string `json:"routerID,omitempty"`
	// SourceAddress is the address the session leaves from, when the node's
	// vip.paas.org/bgp-source-address annotation names one of its family
	// (absent: the kernel's choice).
	// +optional
	// +kubebuilder:validation:MaxLength=45
	SourceAddress string `json:"sourceAddress,omitempty"`
}

// BFD session states of BGPSession.BFD.
const (
	BFDUp            = "Up"
	BFDInit          = "Init"
	BFDDown          = "Down"
	BFDAdminDown     = "AdminDown"
	BFDNotConfigured = "NotConfigured"
)

// SessionEstablished is the State of an up session (RFC 4271's name).
const SessionEstablished = "Established"

// BGPPeer condition types and reasons.
const (
	// BGPPeerAccepted is True when the agents peer with the router.
	BGPPeerAccepted = "Accepted"
	// BGPPeerEstablished is True when every node that peers with the router
	// has its session established.
	BGPPeerEstablished = "Established"

	// ReasonPeerAccepted: the peer is valid and the agents of its nodes use it.
	ReasonPeerAccepted = "Accepted"
	// ReasonPasswordSecretNotFound: passwordSecret names a Secret or key that
	// does not exist.
	ReasonPasswordSecretNotFound = "PasswordSecretNotFound"
	// ReasonPasswordSecretNotLabelled: passwordSecret names a Secret without
	// the label vip.paas.org/bgp-password: "true" (BGPPasswordLabel); nothing
	// is copied out of it.
	ReasonPasswordSecretNotLabelled = "PasswordSecretNotLabelled"
	// ReasonPasswordSecretMissingKeptLastGood: the Secret or key passwordSecret
	// names is gone, and the agents keep the password last copied from it, so
	// the sessions stay up. Accepted stays True: the agents use the peer.
	// Restoring the Secret, pointing passwordSecret at a valid one, or
	// removing passwordSecret ends it.
	ReasonPasswordSecretMissingKeptLastGood = "PasswordSecretMissingKeptLastGood"
	// ReasonPasswordSecretNotLabelledKeptLastGood: the Secret passwordSecret
	// names lost the label vip.paas.org/bgp-password: "true"; the agents keep
	// the password last copied from it, as with a missing Secret.
	ReasonPasswordSecretNotLabelledKeptLastGood = "PasswordSecretNotLabelledKeptLastGood"
	// ReasonNoNodes: the nodeSelector selects no node running an agent.
	ReasonNoNodes = "NoNodes"
	// ReasonAllEstablished: every selected node has its session up.
	ReasonAllEstablished = "AllEstablished"
	// ReasonSessionsDown: some selected nodes have no established session.
	ReasonSessionsDown = "SessionsDown"
	// ReasonNoSessionYet: no agent reported a session yet.
	ReasonNoSessionYet = "NoSessionYet"

	// BGPPeerBFDUp is True when spec.bfd is set and every established
	// session has its BFD session up; absent without spec.bfd.
	BGPPeerBFDUp = "BFDUp"
	// ReasonBFDUp: every established session has BFD up.
	ReasonBFDUp = "BFDUp"
	// ReasonBFDDown: some established sessions run without BFD up (the
	// router does not run BFD for those nodes, or the path is failing).
	ReasonBFDDown = "BFDDown"
	// ReasonNoEstablishedSession: no session is established, so BFD is not
	// expected up yet (see the Established condition).
	ReasonNoEstablishedSession = "NoEstablishedSession"
)

// EventPasswordKeptLastGood is the Warning Event on a BGPPeer whose password
// Secret went away (or lost its label or key) while the agents keep the
// password last copied from it.
const EventPasswordKeptLastGood = "PasswordKeptLastGood"

// BGPPeer is a BGP router the node agents advertise the VIPs of BGP-mode
// IPGroups to.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:scope=Cluster
// +kubebuilder:printcolumn:name="Peer",type=string,JSONPath=`.spec.peerAddress`
// +kubebuilder:printcolumn:name="Interface",type=string,JSONPath=`.spec.interface`,priority=1
// +kubebuilder:printcolumn:name="Peer ASN",type=integer,JSONPath=`.spec.peerASN`
// +kubebuilder:printcolumn:name="My ASN",type=integer,JSONPath=`.spec.myASN`
// +kubebuilder:printcolumn:name="Accepted",type=string,JSONPath=`.status.conditions[?(@.type=="Accepted")].status`
// +kubebuilder:printcolumn:name="Established",type=string,JSONPath=`.status.conditions[?(@.type=="Established")].status`
// +kubebuilder:printcolumn:name="BFD",type=string,JSONPath=`.status.conditions[?(@.type=="BFDUp")].status`,priority=1
// +kubebuilder:printcolumn:name="Sessions",type=string,JSONPath=`.status.conditions[?(@.type=="Established")].message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type BGPPeer struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +required
	Spec BGPPeerSpec `json:"spec"`
	// +optional
	Status BGPPeerStatus `json:"status,omitempty"`
}

// BGPPeerList is a list of BGPPeers.
// +kubebuilder:object:root=true
type BGPPeerList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []BGPPeer `json:"items"`
}

func init() {
	SchemeBuilder.Register(&BGPPeer{}, &BGPPeerList{})
}
