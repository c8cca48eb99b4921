package ledger

import (
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Holders are the Services ip gives its address to, each with its uid:
// spec.owner first, then spec.sharedWith. None for an object of another kind
// than Service: the original operator's and legacy objects name no uid.
func Holders(ip *paasv1.IP) []paasv1.IPOwner {
	if ip.Spec.Owner == nil {
		return nil
	}
	return append([]paasv1.IPOwner{*ip.Spec.Owner}, ip.Spec.SharedWith...)
}

// HeldBy reports whether the Service with uid is one of ip's Holders.
func HeldBy(ip *paasv1.IP, uid types.UID) bool {
	if uid == "" {
		return false
	}
	for _, o := range Holders(ip) {
		if o.UID == uid {
			return true
		}
	}
	return false
}

// HolderUIDs are the uids of ip's Holders, those with none left out. It is
// the agents' rule: only a Service the ledger names by uid may have its
// address carried, so an object naming none (the original operator's, not
// yet given spec.owner; a legacy one) trusts nobody.
func HolderUIDs(ip *paasv1.IP) []types.UID {
	if ip == nil {
		return nil
	}
	var out []types.UID
	for _, o := range Holders(ip) {
		if o.UID != "" {
			out = append(out, o.UID)
		}
	}
	return out
}

// Owner names the Service ip belongs to first: spec.owner, or for an object
// of the original operator, its owner annotation.
func Owner(ip *paasv1.IP) (types.NamespacedName, bool) {
	if o := ip.Spec.Owner; o != nil {
		return types.NamespacedName{Namespace: o.Namespace, Name: o.Name}, true
	}
	return OriginalOwner(ip)
}

// ServiceNames names every Service ip belongs to, by name: its Holders, or
// for an object of the original operator, its owner annotation. It is the
// operator's rule for whom an object's change concerns, which includes the
// Service an original object is about to be given to.
func ServiceNames(ip *paasv1.IP) []types.NamespacedName {
	holders := Holders(ip)
	if len(holders) == 0 {
		if o, ok := OriginalOwner(ip); ok {
			return []types.NamespacedName{o}
		}
		return nil
	}
	out := make([]types.NamespacedName, 0, len(holders))
	for _, o := range holders {
		out = append(out, types.NamespacedName{Namespace: o.Namespace, Name: o.Name})
	}
	return out
}

// LiveHolderKeys maps each address of ledger held by a Service of services
// (same uid) to the keys of those of its Holders.
func LiveHolderKeys(services []corev1.Service, ledger []paasv1.IP) map[netip.Addr][]string {
	live := map[types.UID]bool{}
	for i := range services {
		live[services[i].UID] = true
	}
	out := map[netip.Addr][]string{}
	for i := range ledger {
		addr, ok := ledger[i].Addr()
		if !ok {
			continue
		}
		for _, o := range Holders(&ledger[i]) {
			if live[o.UID] {
				out[addr] = append(out[addr], ServiceKey(types.NamespacedName{Namespace: o.Namespace, Name: o.Name}))
			}
		}
	}
	return out
}

// HolderKeys are the allocator keys of ServiceNames.
func HolderKeys(ip *paasv1.IP) []string {
	var out []string
	for _, h := range ServiceNames(ip) {
		out = append(out, ServiceKey(h))
	}
	return out
}

// OwnerKey is the allocator key of the holder ip names first: its Owner's,
// or a legacy VirtualIP's, or for an object no rule reads, one of its own
// that no Service or VirtualIP goes by.
func OwnerKey(ip *paasv1.IP) string {
	switch KindOf(ip) {
	case Service, Original:
		holder, _ := Owner(ip)
		return ServiceKey(holder)
	case LegacyVirtualIP:
		ns, name, _ := strings.Cut(ip.Annotations[paasv1.OwnerAnnotation], "/")
		return LegacyKey(ns, name)
	default:
		return "unowned " + ip.Name
	}
}
