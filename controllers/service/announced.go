package service

import (
	"context"
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// EventAnnouncerChanged is the Event raised when a Service's announcing node changes.
const EventAnnouncerChanged = "AnnouncerChanged"

// announcement is where one held address stands, from its ledger object.
type announcement struct {
	addr  netip.Addr
	group string
	mode  paasv1.AnnounceMode
	by    []string
	// found: the cache shows the ledger object; proxyReady: it lets the status say ipMode
	// Proxy (paasv1.IP.ProxyReady, adoption_handover.go).
	found, proxyReady bool
}

// announcedCondition computes paasv1.ConditionAnnounced from the announcements of the
// Service's addresses; ok is false when the Service holds none (no condition).
func announcedCondition(generation int64, anns []announcement) (c metav1.Condition, ok bool) {
	if len(anns) == 0 {
		return c, false
	}
	c = metav1.Condition{Type: paasv1.ConditionAnnounced, ObservedGeneration: generation, Status: metav1.ConditionTrue, Reason: paasv1.ReasonAnnounced}
	var parts []string
	fail := func(reason, msg string) {
		c.Status, c.Reason = metav1.ConditionFalse, reason
		parts = append(parts, msg)
	}
	for _, a := range anns {
		switch a.mode {
		case paasv1.AnnounceNone:
			if c.Status == metav1.ConditionTrue && c.Reason == paasv1.ReasonAnnounced {
				c.Reason = paasv1.ReasonStaticRouting
			}
			parts = append(parts, fmt.Sprintf("%s is not announced (IPGroup %s has announce.mode None): the network must route it to the nodes", a.addr, a.group))
		case paasv1.AnnounceBGP:
			if len(a.by) == 0 {
				fail(paasv1.ReasonNoAnnouncer, fmt.Sprintf("no node advertises %s by BGP with an established session yet: it needs an alive agent on a node that matches IPGroup %s's announce.nodeSelector, is not cordoned, has a session Established with a BGPPeer the group uses and, with externalTrafficPolicy Local, a ready endpoint (see the BGPPeers' Established condition)", a.addr, a.group))
			} else {
				parts = append(parts, fmt.Sprintf("%s advertised by %s (BGP)", a.addr, strings.Join(a.by, ", ")))
			}
		default:
			if len(a.by) == 0 {
				fail(paasv1.ReasonNoAnnouncer, fmt.Sprintf("no node announces %s yet: it needs an alive agent on a node that matches IPGroup %s's announce.nodeSelector, is not cordoned, has an interface on the VIP's subnet and, with externalTrafficPolicy Local, a ready endpoint (see the IPGroup's Announceable condition)", a.addr, a.group))
			} else {
				parts = append(parts, fmt.Sprintf("%s announced by %s (L2)", a.addr, strings.Join(a.by, ", ")))
			}
		}
	}
	c.Message = strings.Join(parts, "; ")
	return c, true
}

// announcements reads, from the cache, where each held address is announced.
func (r *Reconciler) announcements(ctx context.Context, held []netip.Addr, groupOf map[netip.Addr]string) ([]announcement, error) {
	var out []announcement
	for _, addr := range held {
		a := announcement{addr: addr, group: groupOf[addr]}
		// Both objects are only read: the cache's own serve, uncopied.
		var ip paasv1.IP
		err := r.Client.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(addr)}, &ip, client.UnsafeDisableDeepCopy)
		if client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("get ledger IP %s: %w", addr, err)
		}
		a.found = err == nil
		a.by = ip.Status.AnnouncedBy
		if a.group == "" {
			a.group = ip.Labels[paasv1.IPGroupLabel]
		}
		var g paasv1.IPGroup
		if err := r.Client.Get(ctx, client.ObjectKey{Name: a.group}, &g, client.UnsafeDisableDeepCopy); client.IgnoreNotFound(err) != nil {
			return nil, fmt.Errorf("get IPGroup %s: %w", a.group, err)
		}
		a.mode = election.ModeOf(&g) // L2 for a group not found, as for one without a mode
		a.proxyReady = ip.ProxyReady(a.mode)
		out = append(out, a)
	}
	return out, nil
}

// announcerEvent tells, in an Event, that the announcing node(s) changed.
func (r *Reconciler) announcerEvent(svc *corev1.Service, old *metav1.Condition, cur metav1.Condition) {
	if cur.Reason != paasv1.ReasonAnnounced || (old != nil && old.Message == cur.Message) {
		return
	}
	r.Recorder.Event(svc, corev1.EventTypeNormal, EventAnnouncerChanged, cur.Message)
}
