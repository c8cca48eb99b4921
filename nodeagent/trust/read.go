package trust

import (
	"cmp"
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
)

// Read reads, from the cache, the View of the addresses in the status of the
// Services ours: each address's ledger object by its name (the name is the
// address: a lookup, no list), the Nodes, and the migrating VirtualIPs only
// when one of those addresses is local (one of this node's own, as the caller
// read them: nodes.OwnAddresses). unviewed reads the Nodes that publish no
// view (nil: none); self is this node's name.
func Read(ctx context.Context, c client.Reader, unviewed *nodes.Unviewed, self string, services []corev1.Service, ownClassOnly bool, local map[netip.Addr]string) (View, error) {
	nodes, _, err := nodes.List(ctx, c, unviewed)
	if err != nil {
		return View{}, err
	}
	v, err := ReadWith(ctx, c, services, ownClassOnly, local, NodeAddresses(nodes, self))
	v.NodeIPs = make(map[string][]netip.Addr, len(nodes))
	for i := range nodes {
		v.NodeIPs[nodes[i].Name] = election.InternalIPs(&nodes[i])
	}
	return v, err
}

// ReadWith is Read with the Nodes' addresses already read (see
// NodeAddresses): the announcer keeps them from pass to pass.
func ReadWith(ctx context.Context, c client.Reader, services []corev1.Service, ownClassOnly bool, local, nodeAddrs map[netip.Addr]string) (View, error) {
	v := View{Holders: map[netip.Addr][]types.UID{}, Reserved: map[netip.Addr]string{}, NodeAddrs: nodeAddrs, Local: local,
		AwaitingDataPath: map[netip.Addr]bool{}, Groups: map[netip.Addr]string{}}
	anyLocal := false
	for i := range services {
		if !lbclass.Handles(&services[i], ownClassOnly) {
			continue
		}
		for _, vip := range ingress.Addrs(&services[i]) {
			if _, seen := v.Holders[vip]; seen {
				continue
			}
			_, isLocal := local[vip]
			anyLocal = anyLocal || isLocal
			var ip paasv1.IP
			if err := c.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(vip)}, &ip); err != nil {
				if apierrors.IsNotFound(err) {
					continue
				}
				return v, fmt.Errorf("get ledger IP %s: %w", paasv1.IPObjectName(vip), err)
			}
			if uids := ledger.HolderUIDs(&ip); len(uids) > 0 {
				v.Holders[vip] = uids
			}
			if ip.Reserved() {
				v.Reserved[vip] = ip.Spec.ReservedBy
			}
			if g := cmp.Or(ip.Spec.IPGroup, ip.Labels[paasv1.IPGroupLabel]); g != "" {
				v.Groups[vip] = g
			}
			if ip.Spec.AwaitingDataPath {
				v.AwaitingDataPath[vip] = true
			}
		}
	}
	if anyLocal {
		var legacy paasv1.VirtualIPList
		if err := c.List(ctx, &legacy); err != nil {
			return v, fmt.Errorf("list VirtualIPs: %w", err)
		}
		v.Keepalived = migratingAddresses(legacy.Items)
	}
	return v, nil
}
