package service

import (
	"context"
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// Shared addresses in the ledger. One IP object per address still: the first
// Service creates it (creation is the lock) with spec.owner and
// spec.sharingKey; each Service that joins is appended to spec.sharedWith,
// and each that leaves is removed, both by an update carrying the
// resourceVersion read, so two writers never lose each other's change (a
// conflict is read again and retried). When spec.owner leaves, the first of
// spec.sharedWith takes its place (and the owner annotation follows), so an
// object always names its holders exactly as an unshared one does; the object
// is deleted, with the same resourceVersion precondition, when its last
// holder leaves. The allocator in memory decides who may join; the ledger
// records it.

// mayJoin reports whether memory lets key join existing, the ledger object of
// addr another Service created: memory holds addr for key together with
// every holder the object names.
func (r *Reconciler) mayJoin(key string, addr netip.Addr, existing *paasv1.IP) bool {
	r.state.mu.Lock()
	defer r.state.mu.Unlock()
	holders := r.state.alloc.Holders(addr)
	if !slices.Contains(holders, key) || existing.Spec.Owner == nil {
		return false
	}
	for _, h := range ledger.HolderKeys(existing) {
		if !slices.Contains(holders, h) {
			return false
		}
	}
	return true
}

// joinLedger adds svc to the holders of existing (an update with its
// resourceVersion; a conflict returns an error, and the retry reads it again).
func (r *Reconciler) joinLedger(ctx context.Context, svc *corev1.Service, existing *paasv1.IP, sharingKey string) error {
	if len(ledger.Holders(existing)) >= paasv1.MaxSharers {
		return fmt.Errorf("join ledger IP %s for %s/%s: it already has %d holders", existing.Name, svc.Namespace, svc.Name, paasv1.MaxSharers)
	}
	desired := existing.DeepCopy()
	desired.Spec.SharingKey = sharingKey
	desired.Spec.SharedWith = append(desired.Spec.SharedWith, paasv1.IPOwner{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID})
	if err := r.Client.Update(ctx, desired, paasv1.FieldOwner); err != nil {
		return fmt.Errorf("join ledger IP %s for %s/%s: %w", existing.Name, svc.Namespace, svc.Name, err)
	}
	r.state.ledgerCreated(desired.Name, svc.UID, "")
	return nil
}

// leaveLedger removes the holders drop picks from each object: an object left
// with none is deleted, the others updated. Both carry the resourceVersion;
// on a conflict the object is read again and the step retried.
func (r *Reconciler) leaveLedger(ctx context.Context, ips []paasv1.IP, drop func(paasv1.IPOwner) bool) error {
	for i := range ips {
		if err := r.leaveOne(ctx, ips[i].DeepCopy(), drop); err != nil {
			return err
		}
	}
	return nil
}

func (r *Reconciler) leaveOne(ctx context.Context, ip *paasv1.IP, drop func(paasv1.IPOwner) bool) error {
	for attempt := 0; ; attempt++ {
		remaining := slices.DeleteFunc(ledger.Holders(ip), drop)
		var err error
		if len(remaining) == 0 && inUseOnLANWho(ip) != "" {
			err = r.keepAsRecord(ctx, ip)
		} else if len(remaining) == 0 {
			// The resourceVersion: someone may have joined since it was read.
			uid, rv := ip.UID, ip.ResourceVersion
			err = r.Client.Delete(ctx, ip, client.Preconditions{UID: &uid, ResourceVersion: &rv})
		} else if len(remaining) == len(ledger.Holders(ip)) {
			return nil
		} else {
			ip.Spec.Owner, ip.Spec.SharedWith = &remaining[0], remaining[1:]
			if len(ip.Spec.SharedWith) == 0 {
				ip.Spec.SharedWith = nil
			}
			if ip.Annotations == nil {
				ip.Annotations = map[string]string{}
			}
			ip.Annotations[paasv1.OwnerAnnotation] = remaining[0].Namespace + "/" + remaining[0].Name
			err = r.Client.Update(ctx, ip, paasv1.FieldOwner)
		}
		switch {
		case err == nil || apierrors.IsNotFound(err):
			return nil
		case !apierrors.IsConflict(err) || attempt == 4:
			return fmt.Errorf("leave ledger IP %s: %w", ip.Name, err)
		}
		fresh := &paasv1.IP{}
		if err := r.APIReader.Get(ctx, client.ObjectKeyFromObject(ip), fresh); err != nil {
			return client.IgnoreNotFound(err)
		}
		if fresh.UID != ip.UID {
			return nil // another object of that name now: not ours to change
		}
		ip = fresh
	}
}

// dropUID picks the holder with uid.
func dropUID(uid types.UID) func(paasv1.IPOwner) bool {
	return func(o paasv1.IPOwner) bool { return o.UID == uid }
}

// dropName picks the holders named key, whatever their uid (the Service is
// gone, or is no longer ours to serve).
func dropName(key types.NamespacedName) func(paasv1.IPOwner) bool {
	return func(o paasv1.IPOwner) bool { return o.Namespace == key.Namespace && o.Name == key.Name }
}

// dropStale picks the holders named key with another uid than live: an
// earlier Service of that name.
func dropStale(key types.NamespacedName, live types.UID) func(paasv1.IPOwner) bool {
	return func(o paasv1.IPOwner) bool { return dropName(key)(o) && o.UID != live }
}

// syncLedgerSharingKey records on ip, which svc holds alone, the sharing key
// svc has now, so that a Service joining later finds it.
func (r *Reconciler) syncLedgerSharingKey(ctx context.Context, ip *paasv1.IP, sharingKey string) error {
	if ip.Spec.SharingKey == sharingKey || len(ledger.Holders(ip)) != 1 {
		return nil
	}
	desired := ip.DeepCopy()
	desired.Spec.SharingKey = sharingKey
	if err := r.Client.Update(ctx, desired, paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("record sharing key on ledger IP %s: %w", ip.Name, err)
	}
	return nil
}
