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

//
// One host may answer for many addresses: a router doing proxy ARP answers
// every probe, and so does a hostile host. Believed, it would walk each new
// Service through the whole pool and take every address it answered for out
// of it. So past MaxInUseOnLANPerMAC addresses of one group, a MAC's answers
// no longer move a key in that group (FloodingMACs): the key keeps the
// address, marked. A free address it answered for is still handed to no one:
// the ledger keeps its record, which a new key could not take.

// ErrInUseOnLAN marks the error of a request for an address in use on the LAN.
var ErrInUseOnLAN = errors.New("requested IP in use on the LAN")

// MaxInUseOnLANPerMAC is how many addresses of one group the answers of one
// MAC may take out of it. A host configured by hand, or a router, holds one
// or two; a few more are a LAN's honest mistakes; beyond, the MAC answers for
// what is not its own.
const MaxInUseOnLANPerMAC = 4

// lanMark is who uses an address on the LAN: the MAC that answered the
// probe, and who for messages.
type lanMark struct{ mac, who string }

// SetInUseOnLAN marks addr in use on the LAN by the host with mac, described
// by who (for messages: "the host with MAC 02:00:00:00:00:cc, since ..."), or
// clears the mark when who is empty. Keys holding it keep it until their
// next Allocate.
func (a *Allocator) SetInUseOnLAN(addr netip.Addr, mac, who string) {
	if a.onLAN == nil {
		a.onLAN = map[netip.Addr]lanMark{}
	}
	a.flooding = nil
	if who != "" {
		a.onLAN[addr] = lanMark{mac: mac, who: who}
		return
	}
	if _, was := a.onLAN[addr]; was {
		delete(a.onLAN, addr)
		a.rewindHints(addr) // free again
	}
}

// InUseOnLAN reports who uses addr on the LAN, when it is marked so.
func (a *Allocator) InUseOnLAN(addr netip.Addr) (string, bool) {
	m, ok := a.onLAN[addr]
	return m.who, ok
}

// movesOff reports whether the mark on addr moves the keys holding it: it is
// marked, and its MAC is none of the FloodingMACs of a group containing addr.
func (a *Allocator) movesOff(addr netip.Addr) bool {
	m, ok := a.onLAN[addr]
	if !ok {
		return false
	}
	flooding := a.FloodingMACs()
	for _, g := range a.groups {
		if g.Contains(addr) && slices.Contains(flooding[g.Name], m.mac) {
			return false
		}
	}
	return true
}

// FloodingMACs maps each group to the MACs (sorted) that answered for more
// than MaxInUseOnLANPerMAC of its addresses; groups with none are absent.
func (a *Allocator) FloodingMACs() map[string][]string {
	if a.flooding == nil {
		marks := make(map[netip.Addr]string, len(a.onLAN))
		for addr, m := range a.onLAN {
			marks[addr] = m.mac
		}
		a.flooding = FloodingMACs(marks, a.groups)
	}
	return a.flooding
}

// FloodingMACs maps each of groups to the MACs (sorted) that marks, the
// addresses in use on the LAN with the MAC that answered for each, name for
// more than MaxInUseOnLANPerMAC of the group's addresses. An empty MAC (an
// answer that named none) counts as one host.
func FloodingMACs(marks map[netip.Addr]string, groups []*Group) map[string][]string {
	out := map[string][]string{}
	for _, g := range groups {
		count := map[string]int{}
		for addr, mac := range marks {
			if g.Contains(addr) {
				count[mac]++
			}
		}
		for mac, n := range count {
			if n > MaxInUseOnLANPerMAC {
				out[g.Name] = append(out[g.Name], mac)
			}
		}
		slices.Sort(out[g.Name])
	}
	return out
}

// leaveInUseOnLAN makes key give up the addresses of held in use on the LAN
// and returns the others.
func (a *Allocator) leaveInUseOnLAN(key string, held []netip.Addr) []netip.Addr {
	return slices.DeleteFunc(held, func(addr netip.Addr) bool {
		if a.movesOff(addr) {
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
