package ipgroup

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// An address stays where it is until someone asks. An IPGroup from which
// Services hold addresses carries paasv1.AddressesHeldFinalizer, as a PVC in
// use carries its protection: deleting the group leaves it Terminating, and
// excluding an address or shrinking a part leaves the address with its
// holder. Such a Service keeps its address (the Service reconciler passes it
// to the allocator as Request.Keep) and the agents keep announcing it (they
// read the group through the ledger's label, which a Terminating group still
// answers). The admin lets the addresses go with
// paasv1.ReleaseAddressesAnnotation; the Services then move by the usual
// relocation, and a Terminating group loses its finalizer once none holds
// an address recorded as its own.

// maxNamedHolders bounds the holders a condition message names.
const maxNamedHolders = 5

// protectionView is what an IPGroup's reconcile read about the addresses the
// ledger records as the group's.
type protectionView struct {
	deleting  bool // metadata.deletionTimestamp is set
	finalizer bool // it carries AddressesHeldFinalizer
	released  bool // ReleaseAddressesAnnotation is "true"
	// holders counts the Services (and legacy VirtualIPs) holding an address
	// the ledger records as the group's.
	holders int
	// kept are those of the addresses the group no longer allows (all of
	// them when it is being deleted), by address.
	kept []keptAddress
}

// keptAddress is an address the group no longer allows and its holders.
type keptAddress struct {
	addr    netip.Addr
	holders []string
}

// finalizerStep is what the reconcile does with AddressesHeldFinalizer.
type finalizerStep int

const (
	finalizerLeave finalizerStep = iota
	finalizerAdd
	finalizerRemove
)

func (s finalizerStep) String() string {
	return [...]string{"leave", "add", "remove"}[s]
}

// decideProtection returns what to do with the group's finalizer and its
// AddressesKept condition. A group with holders gets the finalizer; a group
// loses it once no Service holds an address recorded as its own (the caller
// confirms that against the API server first: the cache may not show an
// address allocated a moment ago). A group no one holds from carries none,
// as a new group does: an uninstall that deletes the Services first, then
// the CRDs with the operator, must not leave groups that no one is left to
// let go of.
func decideProtection(v protectionView, generation int64) (finalizerStep, metav1.Condition) {
	step := finalizerLeave
	switch {
	case v.holders == 0 && v.finalizer:
		step = finalizerRemove
	case !v.deleting && v.holders > 0 && !v.finalizer:
		step = finalizerAdd
	}
	return step, addressesKeptCondition(v, generation)
}

// addressesKeptCondition counts and names the Services keeping addresses
// the group no longer allows, and says what lets them go.
func addressesKeptCondition(v protectionView, generation int64) metav1.Condition {
	c := metav1.Condition{Type: paasv1.IPGroupAddressesKept, ObservedGeneration: generation, Status: metav1.ConditionTrue}
	n, named := describeKept(v.kept)
	switch {
	case n == 0:
		c.Status, c.Reason = metav1.ConditionFalse, paasv1.ReasonNoneKept
		c.Message = "every address Services hold from this group is one it allows"
	case v.released:
		c.Reason = paasv1.ReasonReleasing
		c.Message = fmt.Sprintf("%d Service(s) hold addresses the group no longer allows and move as soon as another address is free: %s", n, named)
		if v.deleting {
			c.Message += "; the group is deleted once they have moved"
		}
	case v.deleting:
		c.Reason = paasv1.ReasonDeletionBlocked
		c.Message = fmt.Sprintf("the IPGroup is being deleted and %d Service(s) still hold its addresses: %s; they keep them, announced, until you set %s=true on the IPGroup to move them to other groups, or delete them",
			n, named, paasv1.ReleaseAddressesAnnotation)
	default:
		c.Reason = paasv1.ReasonKeptUntilReleased
		c.Message = fmt.Sprintf("%d Service(s) keep addresses the group no longer allows (segment, addresses or excludedIPs changed): %s; set %s=true on the IPGroup to move them, or change the spec back",
			n, named, paasv1.ReleaseAddressesAnnotation)
	}
	return c
}

// describeKept counts the holders of kept and names the first few, each
// with its address, in order.
func describeKept(kept []keptAddress) (int, string) {
	var all []string
	seen := map[string]bool{}
	for _, k := range kept {
		for _, h := range k.holders {
			if !seen[h] {
				seen[h] = true
				all = append(all, fmt.Sprintf("%s (%s)", h, k.addr))
			}
		}
	}
	slices.Sort(all)
	if len(all) <= maxNamedHolders {
		return len(all), strings.Join(all, ", ")
	}
	return len(all), fmt.Sprintf("%s and %d more", strings.Join(all[:maxNamedHolders], ", "), len(all)-maxNamedHolders)
}

// protectionOf reads the view of group g (parsed, nil when its spec is
// unusable) from the ledger objects recorded as its own.
func protectionOf(group *paasv1.IPGroup, g *allocator.Group, ips []paasv1.IP) protectionView {
	v := protectionView{
		deleting:  !group.DeletionTimestamp.IsZero(),
		finalizer: slices.Contains(group.Finalizers, paasv1.AddressesHeldFinalizer),
		released:  group.ReleasesAddresses(),
	}
	holders := map[string]bool{}
	for i := range ips {
		ip := &ips[i]
		addr, ok := ip.Addr()
		if !ok || ip.Labels[paasv1.IPGroupLabel] != group.Name {
			continue
		}
		keys := append([]string{ledger.OwnerKey(ip)}, ledger.HolderKeys(ip)...)
		slices.Sort(keys)
		keys = slices.Compact(keys)
		for _, k := range keys {
			holders[k] = true
		}
		if v.deleting || g == nil || !g.Usable(addr) {
			v.kept = append(v.kept, keptAddress{addr: addr, holders: keys})
		}
	}
	v.holders = len(holders)
	return v
}
