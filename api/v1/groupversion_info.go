// Package v1 holds the paas.org/v1 API: IPGroup (pools), IP (the allocation
// ledger), and the legacy VirtualIP and GroupSegmentMapping kinds, which are read
// only, for migration.
//
// +kubebuilder:object:generate=true
// +groupName=paas.org
package v1

import (
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/scheme"
)

var (
	// GroupVersion is the group and version of every kind in this package.
	GroupVersion = schema.GroupVersion{Group: "paas.org", Version: "v1"}

	// SchemeBuilder registers the kinds with a scheme.
	SchemeBuilder = &scheme.Builder{GroupVersion: GroupVersion} //nolint:staticcheck // the API package is imported by the operator alone, so its dependency on controller-runtime costs nobody

	// AddToScheme adds the kinds of this package to a scheme.
	AddToScheme = SchemeBuilder.AddToScheme
)
