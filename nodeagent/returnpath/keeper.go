package returnpath

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// Marker is what the Keeper needs of a data plane (dataplane.Plane has it).
type Marker interface {
	SetReturnMarks(marks []dataplane.ReturnMark) error
}

// Keeper keeps the node's ways back what the IPGroups and its interfaces call for: observe
// (groups, interfaces and the main table), decide (Decide), apply (routes and rules, then the
// planes' marks). It runs on every IPGroup change and every Period, which also repairs drift
// and follows interfaces and routes that change without an event.
type Keeper struct {
	Client client.Reader
	Planes []Marker
	Period time.Duration
	// Interfaces reads the node's interfaces (nil: Interfaces).
	Interfaces func() ([]returnplan.Interface, error)
	// Recorder tells on an IPGroup that this node has no way back for it (nil: only logged).
	Recorder record.EventRecorder
	NodeName string
	// Layout is where the marks and tables are (the zero value: returnplan.DefaultLayout).
	Layout returnplan.Layout

	missing []returnplan.Missing // last reported, so each change is logged once
}

// +kubebuilder:rbac:groups=paas.org,resources=ipgroups;bgppeers,verbs=get;list;watch

// Reconcile is one pass of the keeper over the IPGroups and BGPPeers.
func (k *Keeper) Reconcile(ctx context.Context, _ reconcile.Request) (reconcile.Result, error) {
	var list paasv1.IPGroupList
	if err := k.Client.List(ctx, &list); err != nil {
		return reconcile.Result{}, fmt.Errorf("list IPGroups: %w", err)
	}
	var peers paasv1.BGPPeerList
	if err := k.Client.List(ctx, &peers); err != nil {
		return reconcile.Result{}, fmt.Errorf("list BGPPeers: %w", err)
	}
	var groups []returnplan.Group
	for i := range list.Items {
		if g, ok := returnplan.GroupOf(&list.Items[i], peers.Items); ok {
			groups = append(groups, g)
		}
	}
	read := k.Interfaces
	if read == nil {
		read = Interfaces
	}
	ifaces, err := read()
	if err != nil {
		return reconcile.Result{}, err
	}
	l := k.layout()
	plan := l.Decide(ifaces, groups)
	// Routes first: a mark with no rule yet leaves by the main table, as without marks.
	errs := []error{ApplyIn(l, plan)}
	for _, p := range k.Planes {
		errs = append(errs, p.SetReturnMarks(MarksIn(l, plan)))
	}
	if !slices.Equal(plan.Missing, k.missing) {
		k.report(ctx, plan.Missing, list.Items)
		k.missing = plan.Missing
	}
	return reconcile.Result{RequeueAfter: k.Period}, errors.Join(errs...)
}

// report tells, once per change, of each group this node has no way back for: in the log,
// and as a Warning Event on the IPGroup, whose message names the node and the fix.
func (k *Keeper) report(ctx context.Context, missing []returnplan.Missing, groups []paasv1.IPGroup) {
	for _, m := range missing {
		field := map[allocator.Family]string{allocator.IPv4: "ipv4", allocator.IPv6: "ipv6"}[m.Family]
		msg := fmt.Sprintf("node %s: no router back on %s for %s: replies to the group's VIPs arriving there leave by the default route, on another network; set spec.announce.gateway.%s to the router on %s's network",
			k.NodeName, m.Interface, m.Family, field, m.Interface)
		ctrl.LoggerFrom(ctx).Info(msg, "ipgroup", m.Group)
		if i := slices.IndexFunc(groups, func(g paasv1.IPGroup) bool { return g.Name == m.Group }); i >= 0 && k.Recorder != nil {
			k.Recorder.Event(&groups[i], corev1.EventTypeWarning, ReasonNoWayBack, msg)
		}
	}
}

// ReasonNoWayBack is the reason of the Event report writes.
const ReasonNoWayBack = "NoWayBack"

// SetupWithManager runs Reconcile on every IPGroup and BGPPeer spec change; all come down to
// one request.
func (k *Keeper) SetupWithManager(mgr ctrl.Manager) error {
	one := handler.EnqueueRequestsFromMapFunc(func(context.Context, client.Object) []reconcile.Request {
		return []reconcile.Request{{}}
	})
	changed := builder.WithPredicates(predicate.GenerationChangedPredicate{})
	return ctrl.NewControllerManagedBy(mgr).Named("returnpath").
		Watches(&paasv1.IPGroup{}, one, changed).
		Watches(&paasv1.BGPPeer{}, one, changed).
		Complete(k)
}

// Marks are the data planes' side of plan: what they mark, and with which value.
func Marks(plan returnplan.Plan) []dataplane.ReturnMark {
	return MarksIn(returnplan.DefaultLayout, plan)
}

// layout is k.Layout, or the default one.
func (k *Keeper) layout() returnplan.Layout {
	if k.Layout == (returnplan.Layout{}) {
		return returnplan.DefaultLayout
	}
	return k.Layout
}

// MarksIn is Marks with l's mark bits.
func MarksIn(l returnplan.Layout, plan returnplan.Plan) []dataplane.ReturnMark {
	var out []dataplane.ReturnMark
	for _, path := range plan.Paths {
		out = append(out, dataplane.ReturnMark{Interface: path.Interface, Mark: path.Mark, Mask: l.MarkMask(), Destinations: path.Destinations})
	}
	return out
}
