package lanrecord

import (
	"context"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/predicate"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// Reconciler deletes the records of addresses in use on the LAN
// (lanRecord) whose verdict was cleared: the host is gone, and the address
// is free for the allocator again.
type Reconciler struct {
	Client client.Client
}

// Reconcile keeps or drops the record of an address in use on the LAN.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var ip paasv1.IP
	if err := r.Client.Get(ctx, req.NamespacedName, &ip); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !ledger.IsLANRecord(&ip) || meta.IsStatusConditionTrue(ip.Status.Conditions, paasv1.IPConditionInUseOnLAN) {
		return ctrl.Result{}, nil
	}
	uid, rv := ip.UID, ip.ResourceVersion
	if err := r.Client.Delete(ctx, &ip, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil && !apierrors.IsConflict(err) {
		return ctrl.Result{}, fmt.Errorf("delete the cleared record %s of an address in use on the LAN: %w", ip.Name, err)
	}
	ctrl.LoggerFrom(ctx).Info("the host using the address on the LAN is gone; its record is deleted and the address free", "ip", ip.Name)
	return ctrl.Result{}, nil
}

// SetupWithManager watches the IP objects that are records, or just became ones.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	records := predicate.NewPredicateFuncs(func(o client.Object) bool {
		ip, ok := o.(*paasv1.IP)
		return ok && ledger.IsLANRecord(ip) && !meta.IsStatusConditionTrue(ip.Status.Conditions, paasv1.IPConditionInUseOnLAN)
	})
	return ctrl.NewControllerManagedBy(mgr).
		Named("lanrecord").
		For(&paasv1.IP{}, builder.WithPredicates(records)).
		Complete(r)
}
