package service

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

// Addresses in use on the LAN, the operator's side. The L2 owner of an address
// never announced probes it first; when a host on the LAN answers, the agent
// writes the IP's InUseOnLAN condition (nodeagent/announce/probe.go). The
// operator then:
//
//   - marks the address in the allocator (internal/allocator/onlan.go), which
//     moves a Service that got it by itself to another address, keeps one that
//     asked for it pending (reason RequestedIPInUseOnLAN, with the MAC), and
//     hands it to no one while the mark stands;
//   - keeps the IP object when its last Service leaves it, without a holder:
//     a record of the address in use (lanRecord), which keeps the mark across
//     restarts and which the address's L2 owner probes again now and then;
//   - moves Services for no more than allocator.MaxInUseOnLANPerMAC answers
//     of one MAC in a group: past that (proxy ARP, or a hostile host) each
//     keeps its address, marked, the IPGroup gets a Warning Event, and the IPGroup
//     reconciler sets the group's condition LANHostAnswersMany;
//   - deletes the record once its verdict is cleared (a silent recheck), or
//     lets a person delete it (config/admission/ip_ledger_writers.yaml), which
//     frees the address: its next owner probes it again before announcing it.

// EventAddressInUseOnLAN is the Warning Event on a Service whose address a
// host on the LAN uses.
const EventAddressInUseOnLAN = "AddressInUseOnLAN"

// inUseOnLANWho is what the allocator says uses ip's address on the LAN ("" when
// nothing does): the MAC, which the agent's message starts with, and since when.
func inUseOnLANWho(ip *paasv1.IP) string {
	_, who := inUseOnLANBy(ip)
	return who
}

// inUseOnLANBy is the MAC that answered for ip's address and inUseOnLANWho.
func inUseOnLANBy(ip *paasv1.IP) (mac, who string) {
	c, ok := ip.InUseOnLAN()
	if !ok {
		return "", ""
	}
	mac, _, _ = strings.Cut(c.Message, " ")
	return mac, fmt.Sprintf("the host with MAC %s (since %s)", mac, c.LastTransitionTime.UTC().Format(time.RFC3339))
}

// markInUseOnLAN keeps the allocator's marks in line with the ledger on every
// IP event, then maps the event as next does. It wakes the pending Services
// when a mark is cleared: one may have asked for the address.
func (r *Reconciler) markInUseOnLAN(c client.Reader, next handler.MapFunc) handler.MapFunc {
	return func(ctx context.Context, o client.Object) []reconcile.Request {
		ip, ok := o.(*paasv1.IP)
		if !ok {
			return next(ctx, o)
		}
		if addr, ok := ip.Addr(); ok {
			mac, who := inUseOnLANBy(ip)
			if who != "" {
				// A deletion's event carries the object as it was: the cache,
				// which drops it first, says whether it is gone.
				if err := c.Get(ctx, client.ObjectKeyFromObject(ip), &paasv1.IP{}); apierrors.IsNotFound(err) {
					who = ""
				}
			}
			r.state.mu.Lock()
			_, was := r.state.alloc.InUseOnLAN(addr)
			before := r.state.alloc.FloodingMACs()
			r.state.alloc.SetInUseOnLAN(addr, mac, who)
			newly := newlyFlooding(before, r.state.alloc.FloodingMACs())
			r.state.mu.Unlock()
			r.floodingEvents(ctx, c, newly)
			if was && who == "" {
				r.wakePending()
			}
		}
		return next(ctx, o)
	}
}

// newlyFlooding are the MACs of after, group by group, that before did not
// name.
func newlyFlooding(before, after map[string][]string) map[string][]string {
	out := map[string][]string{}
	for g, macs := range after {
		for _, mac := range macs {
			if !slices.Contains(before[g], mac) {
				out[g] = append(out[g], mac)
			}
		}
	}
	return out
}

// floodingEvents tells each IPGroup of newly that a MAC answered for more of
// its addresses than one host is believed to use (the group's condition
// LANHostAnswersMany stays while it does).
func (r *Reconciler) floodingEvents(ctx context.Context, c client.Reader, newly map[string][]string) {
	for name, macs := range newly {
		g := &paasv1.IPGroup{}
		if err := c.Get(ctx, client.ObjectKey{Name: name}, g); err != nil {
			continue
		}
		r.Recorder.Eventf(g, corev1.EventTypeWarning, paasv1.ReasonOneMACAnswersMany,
			"MAC %s answered the probe for more than %d addresses of IPGroup %s (proxy ARP, or a hostile host): no Service moves for its answers any more, each keeps its address, marked",
			strings.Join(macs, ", "), allocator.MaxInUseOnLANPerMAC, name)
	}
}

// importInUseOnLAN marks in the allocator the ledger's addresses in use on the
// LAN. The caller holds a.mu.
func (a *allocatorState) importInUseOnLAN(ips []paasv1.IP) {
	for i := range ips {
		if addr, ok := ips[i].Addr(); ok {
			if mac, who := inUseOnLANBy(&ips[i]); who != "" {
				a.alloc.SetInUseOnLAN(addr, mac, who)
			}
		}
	}
}

// leftInUseOnLAN are the addresses of had that the Service no longer holds
// because a host on the LAN uses them, each with who. The caller holds a.mu.
func (a *allocatorState) leftInUseOnLAN(had, held []netip.Addr) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for _, addr := range had {
		if who, ok := a.alloc.InUseOnLAN(addr); ok && !slices.Contains(held, addr) {
			out[addr] = who
		}
	}
	return out
}

// keepAsRecord turns ip, whose last holder left it, into a record of its
// address in use on the LAN (lanRecord), instead of deleting it.
func (r *Reconciler) keepAsRecord(ctx context.Context, ip *paasv1.IP) error {
	ip.Spec.Owner, ip.Spec.SharedWith, ip.Spec.SharingKey = nil, nil, ""
	delete(ip.Annotations, paasv1.OwnerAnnotation)
	return r.Client.Update(ctx, ip, paasv1.FieldOwner)
}

// meetRecord deals with the record of an address in use on the LAN found
// where a new ledger object for addr was to be created: while it stands, the
// allocator learns the mark (the cache may not have shown it yet); cleared,
// it is deleted now rather than by LANRecordReconciler, and the caller's next
// attempt creates the object.
func (r *Reconciler) meetRecord(ctx context.Context, addr netip.Addr, record *paasv1.IP) error {
	if mac, who := inUseOnLANBy(record); who != "" {
		r.state.mu.Lock()
		r.state.alloc.SetInUseOnLAN(addr, mac, who)
		r.state.mu.Unlock()
		return nil
	}
	uid, rv := record.UID, record.ResourceVersion
	if err := r.Client.Delete(ctx, record, client.Preconditions{UID: &uid, ResourceVersion: &rv}); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("delete the cleared record %s of an address in use on the LAN: %w", record.Name, err)
	}
	return nil
}
