package service

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
)

// CleanupFinalizer is the finalizer every Kubernetes load-balancer
// implementation puts on the LoadBalancer Services it serves (the cloud
// service controller's convention, which the upstream e2e specs check): the
// Service, and the addresses its status shows, stay until the implementation
// has released what it holds for it.
const CleanupFinalizer = "service.kubernetes.io/load-balancer-cleanup"

// cleanupIsOurs reports whether the cleanup finalizer on svc is this
// operator's to remove. held says whether svc held addresses here. A
// LoadBalancer is ours when its class is; a Service that is no longer a
// LoadBalancer has lost its class too, so only the ledger tells, except where
// every classless LoadBalancer is ours (no other implementation runs).
func cleanupIsOurs(svc *corev1.Service, ownClassOnly, held bool) bool {
	switch {
	case held:
		return true
	case svc.Spec.Type == corev1.ServiceTypeLoadBalancer:
		return lbclass.Handles(svc, ownClassOnly)
	default:
		return !ownClassOnly
	}
}

// addFinalizer puts name on svc. The patch carries the resourceVersion, so it
// fails, to be retried, when svc changed meanwhile.
func (r *Reconciler) addFinalizer(ctx context.Context, svc *corev1.Service, name string) error {
	if slices.Contains(svc.Finalizers, name) {
		return nil
	}
	desired := svc.DeepCopy()
	desired.Finalizers = append(desired.Finalizers, name)
	if err := r.Client.Patch(ctx, desired, client.MergeFromWithOptions(svc, client.MergeFromWithOptimisticLock{}), paasv1.FieldOwner); err != nil {
		return fmt.Errorf("add finalizer %s to Service %s/%s: %w", name, svc.Namespace, svc.Name, err)
	}
	svc.Finalizers = desired.Finalizers
	svc.ResourceVersion = desired.ResourceVersion
	return nil
}

// dropFinalizer removes name from svc. A JSON patch that tests the entry first
// touches nothing else and fails, to be retried, when the list changed meanwhile.
func (r *Reconciler) dropFinalizer(ctx context.Context, svc *corev1.Service, name string) error {
	i := slices.Index(svc.Finalizers, name)
	if i < 0 {
		return nil
	}
	patch := fmt.Sprintf(`[{"op":"test","path":"/metadata/finalizers/%d","value":%q},{"op":"remove","path":"/metadata/finalizers/%d"}]`, i, name, i)
	desired := svc.DeepCopy()
	err := r.Client.Patch(ctx, desired, client.RawPatch(types.JSONPatchType, []byte(patch)), paasv1.FieldOwner)
	if client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("remove finalizer %s from Service %s/%s: %w", name, svc.Namespace, svc.Name, err)
	}
	if err == nil {
		svc.Finalizers = desired.Finalizers
		svc.ResourceVersion = desired.ResourceVersion
	}
	return nil
}

// dropFinalizers removes, from a Service no longer served here, the original
// operator's finalizer (no one else removes it) and the cleanup finalizer
// when it is ours (cleanupIsOurs).
func (r *Reconciler) dropFinalizers(ctx context.Context, svc *corev1.Service, held bool) error {
	if err := r.dropFinalizer(ctx, svc, paasv1.OriginalServiceFinalizer); err != nil {
		return err
	}
	if !cleanupIsOurs(svc, r.OwnClassOnly, held) {
		return nil
	}
	return r.dropFinalizer(ctx, svc, CleanupFinalizer)
}
