package v1

import (
	"net/netip"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Legacy finalizers, annotations and states, as the original operator wrote them.
const (
	// VirtualIPIPFinalizer kept the ledger IP of a VirtualIP until it was released.
	VirtualIPIPFinalizer = "ip.finalizers.virtualips.paas.org"
	// VirtualIPServiceFinalizer kept the clone Service until it was deleted.
	VirtualIPServiceFinalizer = "service.finalizers.virtualips.paas.org"
	// MigrateAnnotation, set (to any value) on a VirtualIP, asks for its
	// conversion to a LoadBalancer Service. Once set it cannot be removed.
	MigrateAnnotation = "virtualips.paas.org/migrate"
	// KeepalivedGroupAnnotation on the clone Service names the keepalived group
	// ("<namespace>/<name>") that carried the IP.
	KeepalivedGroupAnnotation = "keepalived-operator.redhat-cop.io/keepalivedgroup"
	// CloneServiceSuffix names the clone: "<virtualip>-keepalived-clone".
	CloneServiceSuffix = "-keepalived-clone"

	// VirtualIPValid is the state of a VirtualIP the legacy operator serves.
	VirtualIPValid = "Valid"
	// VirtualIPError is the state of a VirtualIP that needs a person.
	VirtualIPError = "Error"
	// VirtualIPMigrated is the final state: the Service is a LoadBalancer holding the IP.
	VirtualIPMigrated = "Migrated"
	// VirtualIPMigratingPrefix starts every intermediate state, "Migrating: <step>".
	VirtualIPMigratingPrefix = "Migrating: "

	// VirtualIPConditionMigrated reports the migration: False with the step or
	// the refusal as reason while it runs or is blocked, True once done.
	VirtualIPConditionMigrated = "Migrated"
)

// VirtualIPSpec is the legacy request to expose a Service on an IP through keepalived.
// +kubebuilder:validation:XValidation:rule="has(self.ip) == has(oldSelf.ip)",message="ip is immutable: it cannot be added or removed"
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
	// Message says what happened, and on Error what to do.
	// +optional
	Message string `json:"message,omitempty"`
	// IP the VirtualIP holds.
	// +optional
	IP string `json:"ip,omitempty"`
	// Service exposed (the target of the migration).
	// +optional
	Service string `json:"service,omitempty"`
	// ClonedService is the name of the keepalived clone Service.
	// +optional
	ClonedService string `json:"clonedService,omitempty"`
	// GSM is the GroupSegmentMapping the IP came from.
	// +optional
	GSM string `json:"gsm,omitempty"`
	// KeepalivedGroup ("<namespace>/<name>") that carried the IP.
	// +optional
	KeepalivedGroup string `json:"keepalivedGroup,omitempty"`
	// Conditions: Migrated, written by the migration (the legacy operator wrote none).
	// +optional
	// +listType=map
	// +listMapKey=type
	Conditions []metav1.Condition `json:"conditions,omitempty"`
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
// +kubebuilder:printcolumn:name="Message",type=string,JSONPath=`.status.message`,priority=1
// +kubebuilder:printcolumn:name="Age",type=date,JSONPath=`.metadata.creationTimestamp`
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
	// Segment is the CIDR the legacy operator handed IPs out of.
	// +required
	Segment string `json:"segment"`
	// ExcludedIPs were never handed out.
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

// MigrationRequested reports whether v carries MigrateAnnotation.
func (v *VirtualIP) MigrationRequested() bool {
	_, ok := v.Annotations[MigrateAnnotation]
	return ok
}

// Migrated reports whether v reached the final state: its Service holds the IP
// and v holds nothing any more.
func (v *VirtualIP) Migrated() bool { return v.Status.State == VirtualIPMigrated }

// Migrating reports whether v's migration was requested and is not done yet.
func (v *VirtualIP) Migrating() bool { return v.MigrationRequested() && !v.Migrated() }

// LegacyARPExpected reports whether the old keepalived node may still answer
// ARP for v's address next to the new announcer: from the annotation until
// Migrated (keepalived lets go when the clone is deleted, during the cutover).
// The layer-2 split-brain detector must not raise an alarm for such an address.
func (v *VirtualIP) LegacyARPExpected() bool { return v.Migrating() }

// Addr is the address v holds (status.ip); ok is false when it holds none.
func (v *VirtualIP) Addr() (addr netip.Addr, ok bool) {
	addr, err := netip.ParseAddr(v.Status.IP)
	return addr.Unmap(), err == nil
}

func init() {
	SchemeBuilder.Register(&VirtualIP{}, &VirtualIPList{}, &GroupSegmentMapping{}, &GroupSegmentMappingList{})
}
