package service

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

// Node claims, the operator's side. A Node lists its addresses
// (status.addresses, which its own kubelet writes) and its agent publishes
// the node's interface addresses and default gateways (k8salloc.NodeAddresses,
// k8salloc.NodeClaims); neither is trusted with the cluster, so one of those
// addresses a Service holds is a conflict of that node alone. The Service
// keeps the address with no AddressConflict and no spec.reservedBy on its
// ledger object (the agents go on carrying it), the ledger object names the
// claiming nodes (paasv1.ClaimedByAnnotation), each such Node gets a Warning
// Event, and the agents never elect a claiming node to carry it
// (election.Claims). Only what admins write (the cluster's CIDRs, BGPPeers)
// reserves a held address (reserved.go).

// maxClaimedBy bounds the Nodes the annotation names: every node of a subnet
// claims its network and broadcast address.
const maxClaimedBy = 16

// claimedBy is the ClaimedByAnnotation value of claims (sorted by Node);
// empty for none.
func claimedBy(claims []allocator.Reservation) string {
	names := make([]string, 0, min(len(claims), maxClaimedBy))
	for _, c := range claims[:min(len(claims), maxClaimedBy)] {
		names = append(names, c.Node)
	}
	out := strings.Join(names, ",")
	if more := len(claims) - len(names); more > 0 {
		out += fmt.Sprintf(",+%d more", more)
	}
	return out
}

// markClaims writes ClaimedByAnnotation on the Service's ledger objects where
// it changed, and tells each Node newly named.
func (r *Reconciler) markClaims(ctx context.Context, current []paasv1.IP, claims map[netip.Addr][]allocator.Reservation) error {
	for i := range current {
		addr, ok := current[i].Addr()
		if !ok {
			continue
		}
		want := claimedBy(claims[addr])
		had := current[i].Annotations[paasv1.ClaimedByAnnotation]
		if had == want {
			continue
		}
		// A copy: current shares its maps with the cache (markLedger).
		ip := current[i].DeepCopy()
		patch := client.MergeFrom(&current[i])
		if want == "" {
			delete(ip.Annotations, paasv1.ClaimedByAnnotation)
		} else {
			if ip.Annotations == nil {
				ip.Annotations = map[string]string{}
			}
			ip.Annotations[paasv1.ClaimedByAnnotation] = want
		}
		if err := r.Client.Patch(ctx, ip, patch, paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("mark ledger IP %s claimed: %w", ip.Name, err)
		}
		current[i] = *ip
		named := strings.Split(had, ",")
		for _, c := range claims[addr] {
			if !slices.Contains(named, c.Node) {
				r.claimEvent(ctx, ip, addr, c)
			}
		}
	}
	return nil
}

// claimEvent tells the Node c names that it claims addr, which ip gives to a
// Service. A Node gone has no one to tell.
func (r *Reconciler) claimEvent(ctx context.Context, ip *paasv1.IP, addr netip.Addr, c allocator.Reservation) {
	node := &corev1.Node{}
	if err := r.Client.Get(ctx, client.ObjectKey{Name: c.Node}, node); err != nil {
		return
	}
	holder := "a Service"
	if o := ip.Spec.Owner; o != nil {
		holder = "Service " + o.Namespace + "/" + o.Name
	}
	r.Recorder.Eventf(node, corev1.EventTypeWarning, paasv1.EventClaimsServiceAddress,
		"Node %s lists %s as its own (%s) but the ledger (IP %s) gives it to %s: the Service keeps the address and the other nodes carry it, this node never does; remove the address from the node (or the route through it), or find out why the node lists it",
		c.Node, addr, c.Holder, ip.Name, holder)
}
