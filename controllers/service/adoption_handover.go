package service

import (
	"context"
	"fmt"
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// Handing an adopted address from kube-proxy to the agents. Another load balancer's Service
// status shows the address with ipMode VIP (or none, which kube-proxy reads as VIP): kube-proxy
// forwards it on every node. ipMode Proxy makes kube-proxy let go of it at once, so the operator
// writes Proxy only once the agents' rules are there to take over: the ledger object is created
// with spec.awaitingDataPath, the agents program the address from that alone (beside kube-proxy's
// rules, which send to the same endpoints), the nodes announcing it report it programmed
// (status.programmedBy), and paasv1.IP.ProxyReady says when that is enough. The status keeps VIP
// until then; the ledger's mark is cleared once the operator has seen its Proxy status land.

// awaitsDataPath reports whether the ledger object of an address svc is adopting must wait for
// the agents' data path: the operator writes Proxy (configured) and the status shows the address
// with another ipMode, so kube-proxy forwards it now.
func awaitsDataPath(configured corev1.LoadBalancerIPMode, svc *corev1.Service, addr netip.Addr) bool {
	shown, ok := shownMode(svc, addr)
	return configured == corev1.LoadBalancerIPModeProxy && ok && shown != corev1.LoadBalancerIPModeProxy
}

// ipModeFor is the ipMode the status gives a held address: the configured one, except that Proxy
// waits while the address awaits the agents' data path (its ledger object, a; found false when
// the cache does not show it yet). An address the status shows with another mode keeps VIP while
// its ledger object is not seen: it was just adopted, and its object awaits the data path. One
// the status shows as Proxy stays so, whatever the ledger says.
func ipModeFor(configured corev1.LoadBalancerIPMode, a announcement, shown corev1.LoadBalancerIPMode, isShown bool) corev1.LoadBalancerIPMode {
	if configured != corev1.LoadBalancerIPModeProxy {
		return configured
	}
	if isShown && shown == corev1.LoadBalancerIPModeProxy {
		return configured // handed over already: an owner that changes since takes no address back
	}
	if (a.found && !a.proxyReady) || (!a.found && isShown) {
		return corev1.LoadBalancerIPModeVIP
	}
	return configured
}

// shownMode is the ipMode svc's status shows for addr (VIP when the entry has none, as
// kube-proxy reads it); ok is false when the status does not show addr.
func shownMode(svc *corev1.Service, addr netip.Addr) (mode corev1.LoadBalancerIPMode, ok bool) {
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if a, err := netip.ParseAddr(in.IP); err != nil || a.Unmap() != addr {
			continue
		}
		if in.IPMode == nil {
			return corev1.LoadBalancerIPModeVIP, true
		}
		return *in.IPMode, true
	}
	return "", false
}

// ingressOf is the status.loadBalancer.ingress for held, each address with its ipModeFor.
func ingressOf(svc *corev1.Service, held []netip.Addr, configured corev1.LoadBalancerIPMode, anns []announcement) []corev1.LoadBalancerIngress {
	byAddr := make(map[netip.Addr]announcement, len(anns))
	for _, a := range anns {
		byAddr[a.addr] = a
	}
	out := ingressFor(held, configured)
	for i, addr := range held {
		shown, isShown := shownMode(svc, addr)
		mode := ipModeFor(configured, byAddr[addr], shown, isShown)
		out[i].IPMode = &mode
	}
	return out
}

// endHandOver clears spec.awaitingDataPath on ip once svc's status, as this reconcile read it,
// shows the address with ipMode Proxy, and so does every other Service sharing it (as the cache
// shows them): the agents carry it from the statuses from then on. Not earlier: an agent that
// saw the mark go before a holder's Proxy status would drop that holder's rules while
// kube-proxy lets go of them.
func (r *Reconciler) endHandOver(ctx context.Context, svc *corev1.Service, ip *paasv1.IP) error {
	addr, ok := ip.Addr()
	if !ip.Spec.AwaitingDataPath || !ok {
		return nil
	}
	if mode, shown := shownMode(svc, addr); !shown || mode != corev1.LoadBalancerIPModeProxy {
		return nil
	}
	for _, o := range ledger.Holders(ip) {
		if o.UID == svc.UID {
			continue
		}
		other := &corev1.Service{}
		err := r.Client.Get(ctx, client.ObjectKey{Namespace: o.Namespace, Name: o.Name}, other, client.UnsafeDisableDeepCopy)
		if apierrors.IsNotFound(err) {
			continue // gone: nothing of it to hand over
		}
		if err != nil {
			return fmt.Errorf("get Service %s/%s sharing %s: %w", o.Namespace, o.Name, addr, err)
		}
		if mode, shown := shownMode(other, addr); shown && mode != corev1.LoadBalancerIPModeProxy {
			return nil // its reconcile ends it
		}
	}
	desired := ip.DeepCopy()
	desired.Spec.AwaitingDataPath = false
	if err := r.Client.Patch(ctx, desired, client.MergeFrom(ip), paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("end the data path hand-over of ledger IP %s: %w", ip.Name, err)
	}
	return nil
}

// forgetAdoptedNode clears spec.adoptedFromNode once another node announces ip's address
// (paasv1.IP.AdoptedNodeLeft): a failover, or the node may no longer carry it.
func (r *Reconciler) forgetAdoptedNode(ctx context.Context, ip *paasv1.IP) error {
	if !ip.AdoptedNodeLeft() {
		return nil
	}
	desired := ip.DeepCopy()
	desired.Spec.AdoptedFromNode = ""
	if err := r.Client.Patch(ctx, desired, client.MergeFrom(ip), paasv1.FieldOwner); client.IgnoreNotFound(err) != nil {
		return fmt.Errorf("forget the node ledger IP %s was adopted from: %w", ip.Name, err)
	}
	return nil
}
