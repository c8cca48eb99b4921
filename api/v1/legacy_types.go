package v1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// VirtualIPSpec is the legacy request to expose a Service on an IP through keepalived.
type VirtualIPSpec struct {
	// Service is the name of the Service, in the VirtualIP's namespace, to expose.
	// +required
	Service string `json:"service"`
	// IP requested; the legacy operator picked one from the GroupSegmentMapping when empty.
	// +optional
	// +kubebuilder:validation:XValidation:rule="self == oldSelf",message="ip is immutable"
	IP string `json:"ip,omitempty"`
}

// VirtualIPStatus is what the legacy operator reported.
type VirtualIPStatus struct {
	// State: Valid, Error, or during migration "Migrating: ..." and finally Migrated.
	// +optional
	State string `json:"state,omitempty"`
	// +optional
	Message string `json:"message,omitempty"`
	// +optional
	IP string `json:"ip,omitempty"`
	// +optional
	Service string `json:"service,omitempty"`
	// +optional
	ClonedService string `json:"clonedService,omitempty"`
	// +optional
	GSM string `json:"gsm,omitempty"`
	// +optional
	KeepalivedGroup string `json:"keepalivedGroup,omitempty"`
}

// VirtualIP is the legacy way of exposing a Service (through a keepalived clone
// Service). Read for migration only.
//
// +kubebuilder:object:root=true
// +kubebuilder:subresource:status
// +kubebuilder:resource:shortName=vip
// +kubebuilder:printcolumn:name="Service",type=string,JSONPath=`.spec.service`
// +kubebuilder:printcolumn:name="IP",type=string,JSONPath=`.status.ip`
// +kubebuilder:printcolumn:name="State",type=string,JSONPath=`.status.state`
type VirtualIP struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec   VirtualIPSpec   `json:"spec,omitempty"`
	Status VirtualIPStatus `json:"status,omitempty"`
}

// VirtualIPList is a list of VirtualIPs.
// +kubebuilder:object:root=true
type VirtualIPList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []VirtualIP `json:"items"`
}

// GroupSegmentMappingSpec is the legacy pool: a segment served by a keepalived group.
type GroupSegmentMappingSpec struct {
	// +required
	Segment string `json:"segment"`
	// +optional
	ExcludedIPs []string `json:"excludedIPs,omitempty"`
	// KeepalivedGroup is "<namespace>/<name>" of the KeepalivedGroup serving the segment.
	// +optional
	KeepalivedGroup string `json:"keepalivedGroup,omitempty"`
}

// GroupSegmentMapping is the legacy pool kind. Read for migration only.
//
// +kubebuilder:object:root=true
// +kubebuilder:resource:scope=Cluster,shortName=gsm
// +kubebuilder:printcolumn:name="Segment",type=string,JSONPath=`.spec.segment`
// +kubebuilder:printcolumn:name="KeepalivedGroup",type=string,JSONPath=`.spec.keepalivedGroup`
type GroupSegmentMapping struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`

	Spec GroupSegmentMappingSpec `json:"spec,omitempty"`
}

// GroupSegmentMappingList is a list of GroupSegmentMappings.
// +kubebuilder:object:root=true
type GroupSegmentMappingList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []GroupSegmentMapping `json:"items"`
}

func init() {
	SchemeBuilder.Register(&VirtualIP{}, &VirtualIPList{}, &GroupSegmentMapping{}, &GroupSegmentMappingList{})
}
