package allocator

import (
	"errors"
	"net/netip"
	"slices"
)

// Addresses in use on the LAN: the L2 owner probes an address before its first
// announcement, and a host on the LAN answered for this one (a router, a host
// configured by hand). Unlike a reservation, which the cluster holds and which
// a key that holds the address keeps (a person resolves it), an address in
// use on the LAN was never reachable through the cluster: no one loses
// anything when its key moves. So Allocate moves a key off it, as a relocation
// does, and gives it to no one, on request or by itself, until the mark is
// cleared (the host left, or a person says so).

// ErrInUseOnLAN marks the error of a request for an address in use on the LAN.
var ErrInUseOnLAN = errors.New("requested IP in use on the LAN")

// SetInUseOnLAN marks addr in use on the LAN by who (for messages: "MAC
// 02:00:00:00:00:cc, since ..."), or clears the mark when who is empty. Keys
// holding it keep it until their next Allocate.
func (a *Allocator) SetInUseOnLAN(addr netip.Addr, who string) {
	if a.onLAN == nil {
		a.onLAN = map[netip.Addr]string{}
	}
	if who != "" {
		a.onLAN[addr] = who
		return
	}
	if _, was := a.onLAN[addr]; was {
		delete(a.onLAN, addr)
		a.rewindHints(addr) // free again
	}
}

// InUseOnLAN reports who uses addr on the LAN, when it is marked so.
func (a *Allocator) InUseOnLAN(addr netip.Addr) (string, bool) {
	who, ok := a.onLAN[addr]
	return who, ok
}

// leaveInUseOnLAN makes key give up the addresses of held in use on the LAN
// and returns the others.
func (a *Allocator) leaveInUseOnLAN(key string, held []netip.Addr) []netip.Addr {
	return slices.DeleteFunc(held, func(addr netip.Addr) bool {
		if _, inUse := a.onLAN[addr]; inUse {
			a.Leave(key, addr)
			return true
		}
		return false
	})
}

// inUseOnLANIn counts the addresses of fam in use on the LAN that g could
// hand out and no key holds.
func (a *Allocator) inUseOnLANIn(g *Group, fam Family) int {
	n := 0
	for addr := range a.onLAN {
		if _, held := a.owner[addr]; !held && FamilyOf(addr) == fam && g.Usable(addr) {
			n++
		}
	}
	return n
}
