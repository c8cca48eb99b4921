package migration

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Indexes of VirtualIPs: by the Service they expose and by the IP they hold,
// so a Service or ledger event wakes exactly the VirtualIPs it concerns.
const (
	serviceIndex = "migration.spec.service"
	ipIndex      = "migration.status.ip"
)

// SetupWithManager registers the controller: VirtualIPs that carry the migrate
// annotation, woken by their Service, clone, ledger object, and by new IPGroups
// and GroupSegmentMappings (which may unblock them).
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	indexer := mgr.GetFieldIndexer()
	if err := indexer.IndexField(context.Background(), &paasv1.VirtualIP{}, serviceIndex, func(o client.Object) []string {
		vip := o.(*paasv1.VirtualIP)
		return []string{vip.Namespace + "/" + vip.Spec.Service}
	}); err != nil {
		return fmt.Errorf("index VirtualIPs by Service: %w", err)
	}
	if err := indexer.IndexField(context.Background(), &paasv1.VirtualIP{}, ipIndex, func(o client.Object) []string {
		if ip := o.(*paasv1.VirtualIP).Status.IP; ip != "" {
			return []string{ip}
		}
		return nil
	}); err != nil {
		return fmt.Errorf("index VirtualIPs by IP: %w", err)
	}
	c := mgr.GetClient()
	matching := func(ctx context.Context, opts ...client.ListOption) []reconcile.Request {
		var list paasv1.VirtualIPList
		if err := c.List(ctx, &list, opts...); err != nil {
			return nil
		}
		var out []reconcile.Request
		for _, vip := range list.Items {
			if vip.Migrating() {
				out = append(out, reconcile.Request{NamespacedName: client.ObjectKeyFromObject(&vip)})
			}
		}
		return out
	}
	byService := func(ctx context.Context, o client.Object) []reconcile.Request {
		out := matching(ctx, client.MatchingFields{serviceIndex: o.GetNamespace() + "/" + o.GetName()})
		for _, ref := range o.GetOwnerReferences() { // a clone wakes its VirtualIP
			if ref.Kind == "VirtualIP" && ref.APIVersion == paasv1.GroupVersion.String() {
				out = append(out, reconcile.Request{NamespacedName: types.NamespacedName{Namespace: o.GetNamespace(), Name: ref.Name}})
			}
		}
		return out
	}
	byIP := func(ctx context.Context, o client.Object) []reconcile.Request {
		addr, ok := o.(*paasv1.IP).Addr()
		if !ok {
			return nil
		}
		return matching(ctx, client.MatchingFields{ipIndex: addr.String()})
	}
	all := func(ctx context.Context, _ client.Object) []reconcile.Request { return matching(ctx) }
	annotated := predicate.NewPredicateFuncs(func(o client.Object) bool {
		_, ok := o.GetAnnotations()[paasv1.MigrateAnnotation]
		return ok
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("migration").
		For(&paasv1.VirtualIP{}, builder.WithPredicates(annotated)).
		Watches(&corev1.Service{}, handler.EnqueueRequestsFromMapFunc(byService)).
		Watches(&paasv1.IP{}, handler.EnqueueRequestsFromMapFunc(byIP)).
		Watches(&paasv1.IPGroup{}, handler.EnqueueRequestsFromMapFunc(all), builder.WithPredicates(predicate.GenerationChangedPredicate{})).
		Watches(&paasv1.GroupSegmentMapping{}, handler.EnqueueRequestsFromMapFunc(all)).
		WithOptions(controller.Options{MaxConcurrentReconciles: max(r.Options.Workers, 1)}).
		Complete(r)
}
