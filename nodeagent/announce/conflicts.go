package announce

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/nodeagent/l2"
)

// EventARPConflict is the reason of the Warning Event raised when another MAC
// claims a VIP this node announces, by ARP or, for IPv6, by a Neighbor
// Advertisement (one reason for both: alerts match on it).
const EventARPConflict = "ARPConflict"

// ReportConflicts turns the speaker's conflicts into a condition on the ledger
// object and a Warning Event, until ctx ends.
func (a *Announcer) ReportConflicts(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case c := <-a.Speaker.Conflicts():
			arpConflicts.Inc()
			if err := a.reportConflict(ctx, c); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "report address conflict", "vip", c.VIP, "mac", c.MAC.String())
			}
		}
	}
}

func (a *Announcer) reportConflict(ctx context.Context, c l2.Conflict) error {
	var ip paasv1.IP
	if err := a.Client.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(c.VIP)}, &ip); err != nil {
		return err
	}
	if expected, err := a.legacyAnnouncer(ctx, c.VIP); err != nil || expected {
		// A legacy VirtualIP migrating to this address: its keepalived node
		// answers too until the hand-over ends. That is the plan, not a conflict.
		return err
	}
	if ip.HandOverExpected(time.Now()) {
		// Adopted from another load balancer (MetalLB) a moment ago: its speaker
		// answers too until it is removed. Also the plan.
		return nil
	}
	msg := fmt.Sprintf("%s answers %s for %s on the segment of %s/%s, which announces it: another host uses the address or a second load balancer announces it; remove it there, or exclude %s from the IPGroup",
		c.MAC, protocolOf(c.VIP), c.VIP, a.NodeName, c.Interface, c.VIP)
	a.Recorder.Event(&ip, corev1.EventTypeWarning, EventARPConflict, msg)
	for _, o := range ledger.Holders(&ip) { // every Service sharing the address
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: o.Namespace, Name: o.Name, UID: o.UID}}
		a.Recorder.Event(svc, corev1.EventTypeWarning, EventARPConflict, msg)
	}
	patch := client.MergeFrom(ip.DeepCopy())
	meta.SetStatusCondition(&ip.Status.Conditions, metav1.Condition{Type: paasv1.IPConditionConflict, Status: metav1.ConditionTrue, Reason: paasv1.ReasonForeignMAC, Message: msg})
	return a.Client.Status().Patch(ctx, &ip, patch)
}

// protocolOf names what resolves vip on a LAN: ARP, or NDP for IPv6.
func protocolOf(vip netip.Addr) string {
	if vip.Is4() {
		return "ARP"
	}
	return "NDP"
}

// legacyAnnouncer reports whether a legacy VirtualIP of vip is being migrated,
// so its keepalived node may still answer ARP for it.
func (a *Announcer) legacyAnnouncer(ctx context.Context, vip netip.Addr) (bool, error) {
	var legacy paasv1.VirtualIPList
	if err := a.Client.List(ctx, &legacy); err != nil {
		return false, fmt.Errorf("list VirtualIPs: %w", err)
	}
	for i := range legacy.Items {
		if addr, ok := legacy.Items[i].Addr(); ok && addr == vip && legacy.Items[i].LegacyARPExpected() {
			return true, nil
		}
	}
	return false, nil
}

// OurMACs reports whether mac belongs to an interface of one of the cluster's
// nodes (their claims of a VIP are hand-overs), from the index the announce
// passes keep.
func (a *Announcer) OurMACs() func(net.HardwareAddr) bool {
	return a.Index.HasMAC
}
