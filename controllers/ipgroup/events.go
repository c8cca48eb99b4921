package ipgroup

import (
	"context"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/workqueue"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	logf "sigs.k8s.io/controller-runtime/pkg/log"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/internal/predicates"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/internal/reserved"
)

type requestQueue = workqueue.TypedRateLimitingInterface[reconcile.Request]

// groupEvents maps each event that changes a group's status to the groups it
// touches, through the catalog, so that one Node's or one group's change costs
// the groups it concerns and not every group.
type groupEvents struct {
	r *Reconciler
	c client.Client
}

func (e groupEvents) enqueue(q requestQueue, names []string, after time.Duration) {
	for _, name := range names {
		req := reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}
		if after > 0 {
			q.AddAfter(req, after)
		} else {
			q.Add(req)
		}
	}
}

// ask enqueues the groups f names, f running under the catalog's lock.
func (e groupEvents) ask(ctx context.Context, q requestQueue, after time.Duration, f func() []string) {
	var names []string
	if err := e.r.catalog.query(ctx, e.c, func() { names = f() }); err != nil {
		logf.FromContext(ctx).Error(err, "read IPGroups to map an event; every group is reconciled at its next change")
		return
	}
	e.enqueue(q, names, after)
}

// groups: an IPGroup's change touches the groups its parts overlap, before and after.
func (e groupEvents) groups() handler.Funcs {
	overlapped := func(ctx context.Context, q requestQueue, objs ...client.Object) {
		e.ask(ctx, q, 0, func() []string {
			var out []string
			for _, o := range objs {
				if g, err := k8salloc.Group(o.(*paasv1.IPGroup)); err == nil {
					out = append(out, e.r.catalog.overlappingPrefixes(g.Parts(), o.GetName())...)
				}
			}
			return out
		})
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, ev event.CreateEvent, q requestQueue) {
			e.r.catalog.observe(ev.Object.(*paasv1.IPGroup))
			overlapped(ctx, q, ev.Object)
		},
		UpdateFunc: func(ctx context.Context, ev event.UpdateEvent, q requestQueue) {
			// The catalog holds specs: a status or metadata write changes nothing in it.
			if ev.ObjectOld.GetGeneration() != ev.ObjectNew.GetGeneration() {
				e.r.catalog.observe(ev.ObjectNew.(*paasv1.IPGroup))
				overlapped(ctx, q, ev.ObjectOld, ev.ObjectNew)
			}
		},
		DeleteFunc: func(ctx context.Context, ev event.DeleteEvent, q requestQueue) {
			if g, ok := ev.Object.(*paasv1.IPGroup); ok {
				e.r.catalog.forget(g.Name, g.UID)
				overlapped(ctx, q, ev.Object)
			}
		},
	}
}

// nodes: a Node's change touches the groups whose announcers or reservations it changes.
func (e groupEvents) nodes() handler.Funcs {
	touched := func(ctx context.Context, q requestQueue, old, cur *corev1.Node) {
		e.ask(ctx, q, statusDelay, func() []string { return e.r.catalog.groupsForNode(old, cur, e.r.OnCordon) })
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, ev event.CreateEvent, q requestQueue) {
			touched(ctx, q, nil, ev.Object.(*corev1.Node))
		},
		UpdateFunc: func(ctx context.Context, ev event.UpdateEvent, q requestQueue) {
			old, cur := ev.ObjectOld.(*corev1.Node), ev.ObjectNew.(*corev1.Node)
			if predicates.NodeAnnouncingChanged(old, cur) || reserved.Changed(old, cur) {
				touched(ctx, q, old, cur)
			}
		},
		DeleteFunc: func(ctx context.Context, ev event.DeleteEvent, q requestQueue) {
			if n, ok := ev.Object.(*corev1.Node); ok {
				touched(ctx, q, n, nil)
			}
		},
	}
}

// peers: a BGPPeer's change (its spec) touches every BGP group, and the
// groups holding its address before and after (status.reserved).
func (e groupEvents) peers() handler.Funcs {
	touched := func(ctx context.Context, q requestQueue, peers ...client.Object) {
		e.ask(ctx, q, 0, func() []string {
			out := e.r.catalog.groupsOfMode(paasv1.AnnounceBGP)
			for _, o := range peers {
				if p, ok := o.(*paasv1.BGPPeer); ok {
					if addr, err := netip.ParseAddr(p.Spec.PeerAddress); err == nil {
						out = append(out, e.r.catalog.overlapping(addr.Unmap(), addr.Unmap(), "")...)
					}
				}
			}
			return out
		})
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, ev event.CreateEvent, q requestQueue) { touched(ctx, q, ev.Object) },
		DeleteFunc: func(ctx context.Context, ev event.DeleteEvent, q requestQueue) { touched(ctx, q, ev.Object) },
		UpdateFunc: func(ctx context.Context, ev event.UpdateEvent, q requestQueue) {
			if ev.ObjectOld.GetGeneration() != ev.ObjectNew.GetGeneration() {
				touched(ctx, q, ev.ObjectOld, ev.ObjectNew)
			}
		},
	}
}

// ledger: an IP object's coming or going touches the group its label names
// (which counts the address as relocating when it no longer contains it) and
// the groups containing the address.
func (e groupEvents) ledger() handler.Funcs {
	holding := func(ctx context.Context, o client.Object, q requestQueue) {
		if name := o.GetLabels()[paasv1.IPGroupLabel]; name != "" {
			q.AddAfter(reconcile.Request{NamespacedName: types.NamespacedName{Name: name}}, statusDelay)
		}
		addr, ok := o.(*paasv1.IP).Addr()
		if !ok {
			return
		}
		e.ask(ctx, q, statusDelay, func() []string { return e.r.catalog.overlapping(addr, addr, "") })
	}
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, ev event.CreateEvent, q requestQueue) { holding(ctx, ev.Object, q) },
		DeleteFunc: func(ctx context.Context, ev event.DeleteEvent, q requestQueue) { holding(ctx, ev.Object, q) },
		UpdateFunc: func(ctx context.Context, ev event.UpdateEvent, q requestQueue) {
			// Relabelled to another group (relocation.go): both recount.
			if ev.ObjectOld.GetLabels()[paasv1.IPGroupLabel] != ev.ObjectNew.GetLabels()[paasv1.IPGroupLabel] {
				holding(ctx, ev.ObjectOld, q)
				holding(ctx, ev.ObjectNew, q)
			} else if onLANChanged(ev.ObjectOld.(*paasv1.IP), ev.ObjectNew.(*paasv1.IP)) {
				holding(ctx, ev.ObjectNew, q)
			}
		},
	}
}

// serviceCIDRs: a Service CIDR's coming or going touches every group's status.reserved.
func (e groupEvents) serviceCIDRs() handler.Funcs {
	every := func(ctx context.Context, q requestQueue) { e.ask(ctx, q, statusDelay, e.r.catalog.all) }
	return handler.Funcs{
		CreateFunc: func(ctx context.Context, _ event.CreateEvent, q requestQueue) { every(ctx, q) },
		DeleteFunc: func(ctx context.Context, _ event.DeleteEvent, q requestQueue) { every(ctx, q) },
	}
}

// onLANChanged reports a change of what status.inUseOnLAN and allocated
// count of an IP: its InUseOnLAN verdict, or its becoming a record of it.
func onLANChanged(old, cur *paasv1.IP) bool {
	_, was := old.InUseOnLAN()
	_, is := cur.InUseOnLAN()
	return was != is || ledger.IsLANRecord(old) != ledger.IsLANRecord(cur)
}
