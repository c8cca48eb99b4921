package allocator

import (
	"errors"
	"net/netip"
	"slices"
	"time"
)

// Leases. A Service deleted and created again (a redeploy, a Helm upgrade)
// asks for its address again a moment after releasing it, and a Service that
// waits for that address would otherwise win the race: it is woken the moment
// the address is free. So an address a key asked for by name (spec.loadBalancerIP,
// vip.paas.org/ips) stays leased to that key for a grace after the key releases
// it, as a DHCP server keeps a lease for its last client: the key asking again
// gets it back at once; any other key asking for it is refused with ErrLeased,
// and no key is given it from the pool, until the lease ends. An address the
// key was given from the pool is not leased: the key never depended on it.
//
// The allocator holds no clock: the caller says when a lease ends
// (ReleaseRequested) and when it is now (ExpireLeases, before it allocates).

// ErrLeased refuses an address leased to the key that released it.
var ErrLeased = errors.New("requested IP leased to the Service that released it")

// Lease keeps a released address for the key that had asked for it.
type Lease struct {
	Holder string
	Until  time.Time
}

// ReleaseRequested is Release, and leases to key until until each address of
// requested that key gave up and nobody holds now (a shared address whose
// other holders stay is not leased). A zero until leases nothing.
func (a *Allocator) ReleaseRequested(key string, requested []netip.Addr, until time.Time) []netip.Addr {
	freed := a.Release(key)
	if until.IsZero() {
		return freed
	}
	for _, addr := range freed {
		if _, held := a.owner[addr]; !held && slices.Contains(requested, addr) {
			a.leases[addr] = Lease{Holder: key, Until: until}
		}
	}
	return freed
}

// ExpireLeases ends the leases that end at or before now and returns their
// addresses, free again.
func (a *Allocator) ExpireLeases(now time.Time) []netip.Addr {
	var freed []netip.Addr
	for addr, l := range a.leases {
		if !now.Before(l.Until) {
			delete(a.leases, addr)
			a.rewindHints(addr)
			freed = append(freed, addr)
		}
	}
	slices.SortFunc(freed, netip.Addr.Compare)
	return freed
}

// LeaseOf returns the lease on addr, if any.
func (a *Allocator) LeaseOf(addr netip.Addr) (Lease, bool) {
	l, ok := a.leases[addr]
	return l, ok
}

// NextLeaseEnd is when the first lease ends; ok is false when there is none.
func (a *Allocator) NextLeaseEnd() (end time.Time, ok bool) {
	for _, l := range a.leases {
		if !ok || l.Until.Before(end) {
			end, ok = l.Until, true
		}
	}
	return end, ok
}

// leaseError refuses key addr when it is leased to another key. The message
// names neither the lease holder nor its namespace: it may be another tenant's.
func (a *Allocator) leaseError(key string, addr netip.Addr) error {
	l, ok := a.leases[addr]
	if !ok || l.Holder == key {
		return nil
	}
	return fail(ErrLeased,
		"requested %s was released by the Service that had asked for it and is kept for that Service until %s, in case it is created again; after that it goes to the first Service asking for it; request another address, or wait",
		addr, l.Until.UTC().Format(time.RFC3339))
}

// leasedIn counts the leased addresses of fam that group g could hand out.
func (a *Allocator) leasedIn(g *Group, fam Family) int {
	n := 0
	for addr := range a.leases {
		if FamilyOf(addr) == fam && g.Usable(addr) {
			n++
		}
	}
	return n
}
