package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeViewSpec is what the agents read about a node other than their own,
// copied from the Node by that node's agent. It changes only when one of
// these fields of the Node changes, never on the kubelet's status reports,
// so every agent watches 2,000 small, quiet objects instead of 2,000 Nodes.
type NodeViewSpec struct {
	// Labels are the Node's labels: IPGroup and BGPPeer node selectors match
	// any of them, and node.kubernetes.io/exclude-from-external-load-balancers
	// keeps the node from carrying VIPs.
	// +optional
	// +kubebuilder:validation:MaxProperties=1024
	Labels map[string]string `json:"labels,omitempty"`

	// Unschedulable is the Node's spec.unschedulable (cordoned).
	// +optional
	Unschedulable bool `json:"unschedulable,omitempty"`

	// Deleting is true once the Node is being deleted (deletionTimestamp set).
	// +optional
	Deleting bool `json:"deleting,omitempty"`

	// Interfaces are the node's interfaces the agent published in the Node
	// annotation vip.paas.org/interfaces: which subnets it can announce on,
	// and its MACs (a claim from one of them is a hand-over, not a conflict).
	// At most 128, so that the API server can check every address's prefix
	// within its CEL budget; a node with more publishes no view, and the
	// other agents read its Node.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=128
	Interfaces []NodeViewInterface `json:"interfaces,omitempty"`

	// Addresses are the Node's status.addresses: the InternalIPs gossip is
	// accepted from. The operator copies them; the node's agent may not.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	Addresses []NodeViewAddress `json:"addresses,omitempty"`
}

// NodeViewInterface is one interface of a node, as in the Node annotation
// vip.paas.org/interfaces (the same JSON).
type NodeViewInterface struct {
	// Name of the interface, e.g. eth0.
	// +required
	// +kubebuilder:validation:MaxLength=64
	Name string `json:"name"`
	// MAC address of the interface.
	// +optional
	// +kubebuilder:validation:MaxLength=64
	MAC string `json:"mac,omitempty"`
	// Addrs are its addresses with their prefix length, e.g. 192.0.2.11/24:
	// no wider than a /16 (IPv4) or a /48 (IPv6), as agents read them
	// (Plausible); a node on no LAN wider than that can claim no more.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=256
	// +kubebuilder:validation:items:MaxLength=64
	// +kubebuilder:validation:items:XValidation:rule="!isCIDR(self) || cidr(self).prefixLength() >= (self.contains(':') ? 48 : 16)",message="an interface's address is published with a prefix no wider than /16 (IPv4) or /48 (IPv6): a wider one would be on every subnet"
	Addrs []string `json:"addrs"`
	// Gateways are the next hops of the node's default routes through the
	// interface, e.g. 192.0.2.1: no VIP is given one, and a node never
	// carries a VIP it names as its gateway.
	// +optional
	// +listType=atomic
	// +kubebuilder:validation:MaxItems=16
	// +kubebuilder:validation:items:MaxLength=64
	Gateways []string `json:"gateways,omitempty"`
}

// NodeViewAddress is one of the Node's status.addresses.
type NodeViewAddress struct {
	// Type is InternalIP, ExternalIP, Hostname, ...
	// +required
	// +kubebuilder:validation:MaxLength=64
	Type string `json:"type"`
	// Address as the Node lists it.
	// +required
	// +kubebuilder:validation:MaxLength=256
	Address string `json:"address"`
}

// NodeView is a small copy of one Node (same name) holding only what the
// node agents read of the other nodes. The agent of that node writes it (an
// admission policy holds each agent to its own node's view); the Node owns
// it, so it goes when the Node goes.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=nv
// +kubebuilder:printcolumn:name="Unschedulable",type=boolean,JSONPath=`.spec.unschedulable`
// +kubebuilder:printcolumn:name="Addresses",type=string,JSONPath=`.spec.addresses[*].address`
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
type NodeView struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	// +optional
	Spec NodeViewSpec `json:"spec,omitempty"`
}

// NodeViewList is a list of NodeViews.
//
// +kubebuilder:object:root=true
type NodeViewList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []NodeView `json:"items"`
}

func init() {
	SchemeBuilder.Register(&NodeView{}, &NodeViewList{})
}
