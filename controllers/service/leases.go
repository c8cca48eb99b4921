package service

import (
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
)

// DefaultReleasedAddressGrace is how long an address a Service asked for by
// name stays kept for it after the Service released it (--released-address-grace).
// A delete-and-create (a redeploy, a Helm upgrade, kubectl replace --force)
// takes seconds; minutes cover a slow pipeline.
const DefaultReleasedAddressGrace = 5 * time.Minute

// The leases (internal/allocator/lease.go) live in the operator's memory, not
// in the IP ledger. Keeping a released address's ledger object, marked
// "leased", would survive a restart, but every reader of the ledger takes an
// object there for an address in use: the agents program and announce it, the
// IPGroup status counts it, the original operator's tools show it held, and a
// ledger object without a Service owner is what a legacy VirtualIP's looks
// like. A restart within the grace forgets the lease instead: the address then
// goes to the first Service asking for it, as it would without a grace, which
// is the race the lease narrows, never a double allocation.

// requestedIPs are the addresses svc asks for by name; none when svc is
// unknown or its request is invalid.
func requestedIPs(svc *corev1.Service) []netip.Addr {
	if svc == nil {
		return nil
	}
	req, err := k8salloc.Request(svc, nil)
	if err != nil {
		return nil
	}
	return req.IPs
}

// leaseUntil is when a lease made now ends; zero (no lease) without a grace.
func (r *Reconciler) leaseUntil(now time.Time) time.Time {
	if r.ReleasedGrace <= 0 {
		return time.Time{}
	}
	return now.Add(r.ReleasedGrace)
}

// expireLeases ends the leases that are over and wakes the Services waiting
// for an address when one ended. It runs when the first lease ends, and
// schedules itself again for the next.
func (r *Reconciler) expireLeases() {
	r.state.mu.Lock()
	freed := r.state.alloc.ExpireLeases(time.Now())
	next, ok := r.state.alloc.NextLeaseEnd()
	r.state.mu.Unlock()
	if ok {
		r.scheduleLeaseExpiry(next)
	}
	if len(freed) > 0 {
		r.wakePending()
	}
}

// scheduleLeaseExpiry makes expireLeases run at end, unless it runs earlier
// already.
func (r *Reconciler) scheduleLeaseExpiry(end time.Time) {
	r.leaseTimer.Lock()
	defer r.leaseTimer.Unlock()
	if r.leaseTimer.t != nil && !r.leaseTimer.at.After(end) && r.leaseTimer.at.After(time.Now()) {
		return
	}
	if r.leaseTimer.t != nil {
		r.leaseTimer.t.Stop()
	}
	r.leaseTimer.at = end
	r.leaseTimer.t = time.AfterFunc(time.Until(end), r.expireLeases)
}

// leasedTo are the addresses of addrs leased to key.
func leasedTo(a *allocator.Allocator, key string, addrs []netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, addr := range addrs {
		if l, ok := a.LeaseOf(addr); ok && l.Holder == key {
			out = append(out, addr)
		}
	}
	return out
}
