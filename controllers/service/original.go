package service

import (
	"context"
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// Owning what the original paas.org operator allocated, so that installing
// over it (with or without "vip-allocator migrate upgrade") changes no address
// and hangs no deletion. The original wrote, per LoadBalancer Service, a ledger
// object with label ipgroup=<group>, annotation virtualips.paas.il/owner:
// <namespace>/<name> and no spec; the address in the Service status; and the
// finalizer ips.paas.org/finalizer on the Service, which only it removed.
//
// The operator gives such a ledger object spec.owner in place (an update, so
// the object that locks the address never disappears), then drops the
// finalizer: from then on the ledger is ours and the Service needs none. A
// Service that was already being deleted has its ledger deleted first, so its
// address is free when the Service goes.

// Events of owning the original's ledger objects. The reasons keep the word
// "adopt" users and docs/api.md know them by.
const (
	// EventIPAdopted: a ledger object of the original operator now names the Service as its owner.
	EventIPAdopted = "IPAdopted"
	// EventAdoptionFailed: it could not be; the message says why (most often the
	// original's webhook, still registered with no pod behind it).
	EventAdoptionFailed = "AdoptionFailed"
)

// classifyLedger sorts the ledger objects naming svc: current (svc's, by uid),
// original (the original operator's for svc, to be given spec.owner), stale (an
// earlier Service of the same name, or an address the original had already
// given up). inFlight reports objects owned by an earlier reconcile that the
// cache has not shown yet. An object of the original is svc's when the status
// shows its address, or shows none (the original wrote the ledger first, so a
// crash between its two writes left exactly that).
func classifyLedger(svc *corev1.Service, ips []paasv1.IP, inFlight func(name string) bool) (current, original, stale []paasv1.IP) {
	shown := k8salloc.IngressAddrs(svc)
	for _, ip := range ips {
		switch {
		case ledger.HeldBy(&ip, svc.UID):
			current = append(current, ip)
		case ledger.KindOf(&ip) == ledger.Service:
			stale = append(stale, ip)
		case inFlight(ip.Name):
			current = append(current, ip)
		default:
			addr, ok := ip.Addr()
			if ok && (len(shown) == 0 || slices.Contains(shown, addr)) {
				original = append(original, ip)
			} else {
				stale = append(stale, ip)
			}
		}
	}
	return current, original, stale
}

// ownOriginalLedger gives the original operator's ledger objects of svc
// spec.owner, and returns them as they now are.
func (r *Reconciler) ownOriginalLedger(ctx context.Context, svc *corev1.Service, ips []paasv1.IP) ([]paasv1.IP, error) {
	var owned []paasv1.IP
	for _, ip := range ips {
		addr, _ := ip.Addr()
		desired := ip.DeepCopy()
		desired.Spec = paasv1.IPSpec{Address: addr.String(), IPGroup: ip.Labels[paasv1.IPGroupLabel],
			Owner: &paasv1.IPOwner{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}}
		// Update, not patch: its resourceVersion makes a stale cache fail with a
		// conflict rather than own an object that changed meanwhile.
		if err := r.Client.Update(ctx, desired, paasv1.FieldOwner); err != nil {
			if !apierrors.IsConflict(err) {
				r.Recorder.Eventf(svc, corev1.EventTypeWarning, EventAdoptionFailed,
					"Cannot adopt ledger IP %s that the original operator wrote for this Service (the Service keeps %s meanwhile): %v%s", ip.Name, addr, err, webhookHint(err))
			}
			return nil, fmt.Errorf("own ledger IP %s of the original operator for %s/%s: %w", ip.Name, svc.Namespace, svc.Name, err)
		}
		r.state.ledgerCreated(desired.Name, svc.UID, "")
		r.Recorder.Eventf(svc, corev1.EventTypeNormal, EventIPAdopted, "Adopted %s from the original operator's ledger", addr)
		owned = append(owned, *desired)
	}
	return owned, nil
}

// finishDeletion releases what a Service being deleted holds, then drops the
// finalizers that kept it (the original's, the cleanup one) so the deletion
// completes: until then the Service, and the addresses its status shows, stay.
func (r *Reconciler) finishDeletion(ctx context.Context, svc *corev1.Service) error {
	key := client.ObjectKeyFromObject(svc)
	held, err := r.release(ctx, key, nil, requestedIPs(svc))
	if err != nil {
		r.Recorder.Eventf(svc, corev1.EventTypeWarning, EventAdoptionFailed,
			"Cannot release the addresses of this Service being deleted, so its finalizers stay: %v%s", err, webhookHint(err))
		return err
	}
	if addrs := k8salloc.IngressAddrs(svc); len(addrs) > 0 && held {
		r.Recorder.Eventf(svc, corev1.EventTypeNormal, EventIPReleased, "Released %s: the Service is being deleted", ingress.Join(addrs))
	}
	return r.dropFinalizers(ctx, svc, held)
}

// webhookHint names the fix when an admission webhook refused a ledger write.
// The API server reports an unreachable webhook only in the message ("failed
// calling webhook"); the original operator's, left registered after its pod
// is gone, is the one this operator's install leaves behind.
func webhookHint(err error) string {
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		return ""
	}
	return "; an admission webhook refuses ledger writes: when it is the original operator's (vip.kb.io), run 'vip-allocator migrate upgrade'"
}
