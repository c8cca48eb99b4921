package ledger

import (
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Kind is who wrote a ledger object, which says how its holders are read.
type Kind int

const (
	// Unowned is an object that names no holder any rule can read.
	Unowned Kind = iota
	// Service is this operator's object; spec.owner and spec.sharedWith name
	// the Services holding the address, each with its uid.
	Service
	// Original is the original paas.org operator's object for a LoadBalancer
	// Service (label ipgroup, the owner annotation, no spec), which this
	// operator gives spec.owner in place.
	Original
	// LegacyVirtualIP is a legacy VirtualIP's object; the owner annotation
	// names the VirtualIP, not a Service.
	LegacyVirtualIP
	// LANRecord means no Service holds the address any more, and the object is
	// kept as the record of a host on the LAN using it (condition InUseOnLAN).
	LANRecord
)

func (k Kind) String() string {
	return [...]string{"unowned", "Service", "original", "legacy VirtualIP", "LAN record"}[k]
}

// KindOf says who wrote ip.
func KindOf(ip *paasv1.IP) Kind {
	if ip.Spec.Owner != nil {
		return Service
	}
	if _, ok := OriginalOwner(ip); ok {
		return Original
	}
	if _, _, ok := strings.Cut(ip.Annotations[paasv1.OwnerAnnotation], "/"); ok {
		return LegacyVirtualIP
	}
	if IsLANRecord(ip) {
		return LANRecord
	}
	return Unowned
}

// IsLANRecord reports whether ip is a record of an address in use on the LAN
// that no Service holds any more: no holder, no owner annotation, and an
// InUseOnLAN verdict.
func IsLANRecord(ip *paasv1.IP) bool {
	if ip.Spec.Owner != nil || len(ip.Spec.SharedWith) > 0 {
		return false
	}
	if _, legacy := ip.Annotations[paasv1.OwnerAnnotation]; legacy {
		return false
	}
	return meta.FindStatusCondition(ip.Status.Conditions, paasv1.IPConditionInUseOnLAN) != nil
}

// OriginalOwner names the Service a ledger object written by the original
// operator for a LoadBalancer Service was allocated to: label
// ipgroup=<group>, annotation virtualips.paas.il/owner: <namespace>/<name>,
// and no spec.owner (the original wrote no spec). ok is false for every other
// object: ours (they have spec.owner) and legacy VirtualIP ones (label gsm,
// the annotation naming a VirtualIP).
func OriginalOwner(ip *paasv1.IP) (svc types.NamespacedName, ok bool) {
	if ip.Spec.Owner != nil {
		return types.NamespacedName{}, false
	}
	if _, grouped := ip.Labels[paasv1.IPGroupLabel]; !grouped {
		return types.NamespacedName{}, false
	}
	if _, legacy := ip.Labels[paasv1.LegacyGSMLabel]; legacy {
		return types.NamespacedName{}, false
	}
	ns, name, found := strings.Cut(ip.Annotations[paasv1.OwnerAnnotation], "/")
	if !found || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}
