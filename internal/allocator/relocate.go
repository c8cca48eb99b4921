package allocator

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
)

// Relocation: an IPGroup's segment, excluded IPs or selectors change (a cluster
// moves to a new site), a group is deleted, or a Service's request changes, and
// a key holds an address that no group admitting it allows any more. Allocate
// then re-homes the key, per family:
//
//   - to the address it requests, when that is valid now;
//   - otherwise to the next free address of its candidate groups, except when
//     the requested address is outside every group: then the key keeps its old
//     address until the request is fixed (the admin edits the group first and
//     the Services' requests next, and the address in between would be a
//     surprise and might take one another Service is about to request);
//   - when there is no free address either, it keeps the old one and the error
//     wraps ErrCannotRelocate: an edit never leaves a Service without an address.
//
// An address in Request.Keep is the exception: its group protects it until
// the group's admin releases it (an exclusion, a shrunk part or the group's
// deletion never moves a Service by itself), so the key keeps it, unless it
// requests another valid address or an interrupted move already gave it an
// allowed one.
//
// Assign (the rebuild at start) never re-homes: a held address stays held
// through a restart, and an interrupted move (two addresses of one family) is
// finished by the next Allocate, which prefers an address the key already holds.

// ErrCannotRelocate marks the error of a key that keeps an address its groups
// no longer allow because no other address could be given to it.
var ErrCannotRelocate = errors.New("held IP no longer allowed and no other IP free")

// relocationError says why a key still holds an address no group allows it.
type relocationError struct {
	held  netip.Addr
	cause error
}

func (e *relocationError) Error() string {
	return fmt.Sprintf("%s is no longer allowed by an IPGroup that admits this Service (segment, addresses, excludedIPs, avoidBuggyIPs or selectors changed) and cannot move: %s",
		e.held, e.cause)
}

// Unwrap gives the cause first: its sentinel is the reason a person acts on.
func (e *relocationError) Unwrap() []error { return []error{e.cause, ErrCannotRelocate} }

// Allows reports whether a group that admits req may hand out addr.
func (a *Allocator) Allows(addr netip.Addr, req Request) bool { return a.allowed(addr, req) }

// allowed reports whether a group that admits req may hand out addr.
func (a *Allocator) allowed(addr netip.Addr, req Request) bool {
	return slices.ContainsFunc(a.groups, func(g *Group) bool { return g.Usable(addr) && a.admits(g, req) })
}

// keepsStrandedAddress reports whether a request that failed with err pins the
// key to the address it holds rather than to the next free one.
func keepsStrandedAddress(err error) bool { return errors.Is(err, ErrOutsideGroups) }
