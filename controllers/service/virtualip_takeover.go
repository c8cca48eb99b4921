package service

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// EventIPMigrated is the Service Event of a takeover: the Service took over
// the address of the legacy VirtualIP it migrates from.
const EventIPMigrated = "IPMigrated"

// migratingTo reports whether vip is being migrated to Service svc and still
// holds addr: the only case where a legacy address may change hands.
func migratingTo(vip *paasv1.VirtualIP, svc types.NamespacedName, addr netip.Addr) bool {
	held, ok := vip.Addr()
	return vip.Migrating() && vip.Namespace == svc.Namespace && vip.Spec.Service == svc.Name && ok && held == addr
}

// takeOverFromVirtualIPs hands the addresses of legacy VirtualIPs that migrate
// to svc over to svc, before the allocator is asked: in memory, and in the
// ledger by relabelling the legacy IP object in place (an update, so the object
// that locks the address never disappears, and its resourceVersion makes the
// takeover happen once). Without it, the Service that asks for its VirtualIP's
// address would be told the address is in use by that VirtualIP.
func (r *Reconciler) takeOverFromVirtualIPs(ctx context.Context, svc *corev1.Service, req allocator.Request) error {
	key := client.ObjectKeyFromObject(svc)
	candidates := slices.Clone(req.IPs)
	for _, addr := range k8salloc.IngressAddrs(svc) {
		if !slices.Contains(candidates, addr) {
			candidates = append(candidates, addr)
		}
	}
	for _, addr := range candidates {
		if err := r.takeOverFromVirtualIP(ctx, svc, key, addr); err != nil {
			return fmt.Errorf("take over %s from its VirtualIP for %s: %w", addr, key, err)
		}
	}
	return nil
}

// takeOverFromVirtualIP hands addr to svc (key) when the legacy VirtualIP that
// holds it, in the ledger or in memory, migrates to svc.
func (r *Reconciler) takeOverFromVirtualIP(ctx context.Context, svc *corev1.Service, key types.NamespacedName, addr netip.Addr) error {
	r.state.mu.Lock()
	holder, held := r.state.alloc.Owner(addr)
	r.state.mu.Unlock()

	obj := &paasv1.IP{}
	err := r.Client.Get(ctx, types.NamespacedName{Name: paasv1.IPObjectName(addr)}, obj)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("get ledger IP: %w", err)
	}
	found := err == nil
	var legacyOwner string // "<namespace>/<virtualip>"
	switch {
	case found && obj.Spec.Owner != nil:
		// Already a Service's. If it is ours (relabelled before a restart or by
		// our last reconcile), memory may still say the VirtualIP holds it.
		if obj.Spec.Owner.UID == svc.UID && held && isLegacy(holder) {
			r.moveHold(addr, key)
		}
		return nil
	case found:
		legacyOwner = obj.Annotations[paasv1.OwnerAnnotation]
	case held && isLegacy(holder):
		legacyOwner, _ = ledger.VirtualIPOfKey(holder)
	default:
		return nil
	}
	ns, name, ok := strings.Cut(legacyOwner, "/")
	if !ok || ns != svc.Namespace {
		return nil
	}
	vip := &paasv1.VirtualIP{}
	if err := r.Client.Get(ctx, types.NamespacedName{Namespace: ns, Name: name}, vip); err != nil {
		return client.IgnoreNotFound(err)
	}
	if !migratingTo(vip, key, addr) {
		return nil
	}
	if found {
		r.state.mu.Lock()
		if err := r.state.syncGroups(ctx, r.Client); err != nil {
			r.state.mu.Unlock()
			return err
		}
		group := groupOf(r.state.alloc, addr)
		r.state.mu.Unlock()
		relabelled := obj.DeepCopy()
		if relabelled.Labels == nil {
			relabelled.Labels = map[string]string{}
		}
		delete(relabelled.Labels, paasv1.LegacyGSMLabel)
		relabelled.Labels[paasv1.IPGroupLabel] = group
		if relabelled.Annotations == nil {
			relabelled.Annotations = map[string]string{}
		}
		relabelled.Annotations[paasv1.OwnerAnnotation] = key.String()
		relabelled.Spec = paasv1.IPSpec{Address: addr.String(), IPGroup: group,
			Owner: &paasv1.IPOwner{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}}
		// Update, not patch: the resourceVersion makes a stale cache fail with a
		// conflict instead of relabelling twice.
		if err := r.Client.Update(ctx, relabelled, paasv1.FieldOwner); err != nil {
			if apierrors.IsConflict(err) {
				return fmt.Errorf("relabel ledger IP %s (changed meanwhile, retrying): %w", obj.Name, err)
			}
			return fmt.Errorf("relabel ledger IP %s: %w", obj.Name, err)
		}
		// The cache has not shown the relabelled object yet: do not create it again.
		r.state.ledgerCreated(obj.Name, svc.UID, "")
	}
	r.moveHold(addr, key)
	r.Recorder.Eventf(svc, corev1.EventTypeNormal, EventIPMigrated, "Took over %s from VirtualIP %s/%s", addr, ns, name)
	return nil
}

// moveHold makes key hold addr in memory, whoever held it.
func (r *Reconciler) moveHold(addr netip.Addr, key types.NamespacedName) {
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	r.state.alloc.ReleaseAddr(addr)
	_ = r.state.alloc.Assign(key.String(), addr)
}

// isLegacy reports whether key is a legacy VirtualIP's.
func isLegacy(key string) bool {
	_, ok := ledger.VirtualIPOfKey(key)
	return ok
}
