package nodeagent

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
)

// readTrust reads, from the cache, the trustView of the addresses in the
// status of the Services ours: each address's ledger object by its name (the
// name is the address: a lookup, no list), the Nodes, this node's own
// addresses, and the migrating VirtualIPs only when one of those addresses is
// local. unviewed reads the Nodes that publish no view (nil: none).
func readTrust(ctx context.Context, c client.Reader, unviewed *nodes.Unviewed, services []corev1.Service, ownClassOnly bool, localAddrs func() (map[netip.Addr]string, error)) (trustView, error) {
	nodes, viewed, err := nodes.List(ctx, c, unviewed)
	if err != nil {
		return trustView{}, err
	}
	return readTrustWith(ctx, c, services, ownClassOnly, localAddrs, nodeAddresses(nodes, viewed))
}

// readTrustWith is readTrust with the Nodes' addresses already read (see
// nodeAddresses): the announcer keeps them from pass to pass.
func readTrustWith(ctx context.Context, c client.Reader, services []corev1.Service, ownClassOnly bool, localAddrs func() (map[netip.Addr]string, error), nodeAddrs map[netip.Addr]string) (trustView, error) {
	v := trustView{holders: map[netip.Addr][]types.UID{}, reserved: map[netip.Addr]string{}, nodeAddrs: nodeAddrs}
	local, err := localAddrs()
	if err != nil {
		return v, fmt.Errorf("read this node's addresses: %w", err)
	}
	v.local = local
	anyLocal := false
	for i := range services {
		if !lbclass.Handles(&services[i], ownClassOnly) {
			continue
		}
		for _, vip := range ingress.Addrs(&services[i]) {
			if _, seen := v.holders[vip]; seen {
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
			if uids := ledgerHolders(&ip); len(uids) > 0 {
				v.holders[vip] = uids
			}
			if ip.Reserved() {
				v.reserved[vip] = ip.Spec.ReservedBy
			}
		}
	}
	if anyLocal {
		var legacy paasv1.VirtualIPList
		if err := c.List(ctx, &legacy); err != nil {
			return v, fmt.Errorf("list VirtualIPs: %w", err)
		}
		v.keepalived = migratingAddresses(legacy.Items)
	}
	return v, nil
}
