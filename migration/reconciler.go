package migration

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"time"

	"github.com/redhat-cop/operator-utils/pkg/util"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// DefaultCutoverDelay is how long a Service holds its IP before the keepalived
// clone is deleted: agents program a VIP within a second of the status change,
// and the announcer's gratuitous ARPs run for 5 s after it takes a VIP over.
const DefaultCutoverDelay = 5 * time.Second

// Event reasons on VirtualIPs.
const (
	EventMigrationBlocked = "MigrationBlocked"
	EventMigrated         = "Migrated"
)

// Options configure the migration controller.
type Options struct {
	// OwnClassOnly mirrors the operator's --own-class-only: converted Services
	// get spec.loadBalancerClass paas.org/vip-allocator.
	OwnClassOnly bool
	// CutoverDelay: see DefaultCutoverDelay. Zero means the default.
	CutoverDelay time.Duration
	// Workers is the number of VirtualIPs migrated at once.
	Workers int
	// AfterAction, when set, runs after each action's write and before the
	// status is written; an error ends the reconcile there. Tests use it to stop
	// the operator after every step.
	AfterAction func(ctx context.Context, vip types.NamespacedName, a Action) error
}

// Reconciler migrates VirtualIPs annotated with virtualips.paas.org/migrate.
type Reconciler struct {
	util.ReconcilerBase
	Options Options
}

// +kubebuilder:rbac:groups=paas.org,resources=virtualips,verbs=get;list;watch;update;patch
// +kubebuilder:rbac:groups=paas.org,resources=virtualips/status,verbs=get;update;patch
// +kubebuilder:rbac:groups=paas.org,resources=groupsegmentmappings,verbs=get;list;watch
// +kubebuilder:rbac:groups=paas.org,resources=ipgroups,verbs=get;list;watch;create
// +kubebuilder:rbac:groups=paas.org,resources=ips,verbs=get;list;watch
// Services: patched to become type LoadBalancer (and to carry the migrated
// address), deleted only when they are a VirtualIP's keepalived clone (an
// admission policy, config/admission/operator_service_deletes.yaml, refuses
// the operator any other Service delete; operator_service_updates.yaml holds
// its patches to those fields).
// +kubebuilder:rbac:groups="",resources=services,verbs=get;list;watch;patch;delete
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=get;list;watch
// +kubebuilder:rbac:groups="",resources=events,verbs=create;patch

// Reconcile is one pass over the legacy VirtualIP req names.
func (r *Reconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	vip := &paasv1.VirtualIP{}
	if err := r.GetClient().Get(ctx, req.NamespacedName, vip); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	if !vip.Migrating() {
		return ctrl.Result{}, nil
	}
	observed, err := Observe(ctx, r.GetClient(), vip, r.Options, time.Now())
	if err != nil {
		return r.ManageError(ctx, vip, err)
	}
	d := Decide(observed)
	if err := r.act(ctx, observed, d); err != nil {
		if apierrors.IsConflict(err) {
			// Decided on a cache older than the object: the watch event of the
			// newer version (or this requeue) decides again, no alarm needed.
			return ctrl.Result{RequeueAfter: time.Second}, nil
		}
		return r.ManageError(ctx, vip, fmt.Errorf("%s %s: %w", d.Action, req.NamespacedName, err))
	}
	if d.Action != ActionNone && d.Action != ActionMarkMigrated {
		migrationSteps.WithLabelValues(string(d.Action)).Inc()
	}
	if hook := r.Options.AfterAction; hook != nil && d.Action != ActionNone {
		if err := hook(ctx, req.NamespacedName, d.Action); err != nil {
			return ctrl.Result{}, err
		}
	}
	if err := r.writeStatus(ctx, vip, d); err != nil {
		return r.ManageError(ctx, vip, err)
	}
	// VirtualIP does not implement operator-utils' ConditionsAware, so this
	// writes nothing: ManageSuccess would otherwise rewrite the status on every
	// reconcile. Our own condition is set by writeStatus, only when it changed.
	return r.ManageSuccessWithRequeue(ctx, vip, d.RequeueAfter)
}

// Observe reads everything Decide needs about vip from c (the operator's
// cache, or the CLI's).
func Observe(ctx context.Context, c client.Reader, vip *paasv1.VirtualIP, opts Options, now time.Time) (Observed, error) {
	o := Observed{VIP: vip, OwnClassOnly: opts.OwnClassOnly, CutoverDelay: opts.cutoverDelay(), Now: now}
	svc := &corev1.Service{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: vip.Namespace, Name: vip.Spec.Service}, svc); err == nil {
		o.Service = svc
	} else if !apierrors.IsNotFound(err) {
		return o, fmt.Errorf("get Service %s/%s: %w", vip.Namespace, vip.Spec.Service, err)
	}
	ns := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: vip.Namespace}, ns); client.IgnoreNotFound(err) != nil {
		return o, fmt.Errorf("get Namespace %s: %w", vip.Namespace, err)
	}
	o.NamespaceLabels = ns.Labels
	clone := &corev1.Service{}
	if err := c.Get(ctx, types.NamespacedName{Namespace: vip.Namespace, Name: cloneName(vip)}, clone); err == nil {
		if isCloneOf(clone, vip) {
			o.Clone = clone
		}
	} else if !apierrors.IsNotFound(err) {
		return o, fmt.Errorf("get clone Service %s/%s: %w", vip.Namespace, cloneName(vip), err)
	}
	if addr, err := netip.ParseAddr(vip.Status.IP); err == nil {
		ledger := &paasv1.IP{}
		if err := c.Get(ctx, types.NamespacedName{Name: paasv1.IPObjectName(addr.Unmap())}, ledger); err == nil {
			o.Ledger = ledger
		} else if !apierrors.IsNotFound(err) {
			return o, fmt.Errorf("get ledger IP %s: %w", addr, err)
		}
	}
	var groups paasv1.IPGroupList
	if err := c.List(ctx, &groups); err != nil {
		return o, fmt.Errorf("list IPGroups: %w", err)
	}
	o.Groups = groups.Items
	if vip.Status.GSM != "" {
		gsm := &paasv1.GroupSegmentMapping{}
		if err := c.Get(ctx, types.NamespacedName{Name: vip.Status.GSM}, gsm); err == nil {
			o.GSM = gsm
		} else if !apierrors.IsNotFound(err) {
			return o, fmt.Errorf("get GroupSegmentMapping %s: %w", vip.Status.GSM, err)
		}
	}
	return o, nil
}

func (o Options) cutoverDelay() time.Duration {
	if o.CutoverDelay > 0 {
		return o.CutoverDelay
	}
	return DefaultCutoverDelay
}

// act makes the one write d asks for. Each is idempotent: AlreadyExists and
// NotFound mean an earlier run (maybe before a crash) made it already.
func (r *Reconciler) act(ctx context.Context, o Observed, d Decision) error {
	c := r.GetClient()
	switch d.Action {
	case ActionCreateIPGroup:
		if err := c.Create(ctx, d.IPGroup.DeepCopy(), paasv1.FieldOwner); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create IPGroup %s: %w", d.IPGroup.Name, err)
		}
	case ActionConvertService:
		svc := o.Service.DeepCopy()
		if svc.Spec.Type != corev1.ServiceTypeLoadBalancer {
			svc.Spec.Type = corev1.ServiceTypeLoadBalancer
			if o.OwnClassOnly {
				svc.Spec.LoadBalancerClass = ptr.To(paasv1.LoadBalancerClass)
			}
		}
		svc.Spec.LoadBalancerIP = o.VIP.Status.IP
		if err := c.Patch(ctx, svc, client.MergeFromWithOptions(o.Service, client.MergeFromWithOptimisticLock{}), paasv1.FieldOwner); err != nil {
			return fmt.Errorf("patch Service %s/%s to LoadBalancer: %w", svc.Namespace, svc.Name, err)
		}
	case ActionDeleteClone:
		uid := o.Clone.UID
		if err := c.Delete(ctx, o.Clone, client.Preconditions{UID: &uid}); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("delete clone Service %s/%s: %w", o.Clone.Namespace, o.Clone.Name, err)
		}
	case ActionReleaseLoadBalancerIP:
		svc := o.Service.DeepCopy()
		svc.Spec.LoadBalancerIP = ""
		if err := c.Patch(ctx, svc, client.MergeFromWithOptions(o.Service, client.MergeFromWithOptimisticLock{}), paasv1.FieldOwner); err != nil {
			return fmt.Errorf("clear spec.loadBalancerIP of Service %s/%s: %w", svc.Namespace, svc.Name, err)
		}
	case ActionRemoveFinalizers:
		vip := o.VIP.DeepCopy()
		vip.Finalizers = slices.DeleteFunc(vip.Finalizers, isLegacyFinalizer)
		if err := c.Patch(ctx, vip, client.MergeFromWithOptions(o.VIP, client.MergeFromWithOptimisticLock{}), paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
			return fmt.Errorf("remove legacy finalizers: %w", err)
		}
	}
	return nil
}

// writeStatus reports d in the legacy fields (state, message) and the Migrated
// condition, when they changed; refusals and the end also become Events.
func (r *Reconciler) writeStatus(ctx context.Context, vip *paasv1.VirtualIP, d Decision) error {
	desired := vip.DeepCopy()
	desired.Status.State, desired.Status.Message = d.State, d.Message
	status := metav1.ConditionFalse
	if d.Reason == ReasonMigrated {
		status = metav1.ConditionTrue
	}
	meta.SetStatusCondition(&desired.Status.Conditions, metav1.Condition{Type: paasv1.VirtualIPConditionMigrated,
		Status: status, Reason: d.Reason, Message: d.Message, ObservedGeneration: vip.Generation})
	if equality.Semantic.DeepEqual(vip.Status, desired.Status) {
		return nil
	}
	if err := r.GetClient().Status().Patch(ctx, desired, client.MergeFrom(vip), paasv1.FieldOwner); err != nil {
		if apierrors.IsNotFound(err) {
			return nil // deleted after its finalizers went: nothing left to report on
		}
		return fmt.Errorf("patch status of VirtualIP %s/%s: %w", vip.Namespace, vip.Name, err)
	}
	switch {
	case d.Refused && vip.Status.Message != d.Message:
		migrationRefusals.WithLabelValues(d.Reason).Inc()
		r.GetRecorder().Event(vip, corev1.EventTypeWarning, EventMigrationBlocked, d.Message)
	case d.Action == ActionMarkMigrated:
		migrationSteps.WithLabelValues(string(d.Action)).Inc()
		r.GetRecorder().Event(vip, corev1.EventTypeNormal, EventMigrated, d.Message)
	}
	return nil
}

// cloneName is the clone Service's name, as the VirtualIP's status records it.
func cloneName(vip *paasv1.VirtualIP) string {
	if vip.Status.ClonedService != "" {
		return vip.Status.ClonedService
	}
	return vip.Name + paasv1.CloneServiceSuffix
}

// isCloneOf reports whether svc is vip's keepalived clone: owned by it. Only
// then may the migration delete it.
func isCloneOf(svc *corev1.Service, vip *paasv1.VirtualIP) bool {
	return slices.ContainsFunc(svc.OwnerReferences, func(ref metav1.OwnerReference) bool {
		return ref.UID == vip.UID && ref.Kind == "VirtualIP"
	})
}
