package allocator

import (
	"errors"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// Shared addresses. Keys whose Sharing names the same Key, in one namespace
// (or in namespaces that allow each other), hold one address together when
// their ports do not collide, all of them together expose at most
// MaxSharedPorts ports and, if several have externalTrafficPolicy Local, they
// select the same endpoints. The first holder of an address is its owner
// (Owner); the others join it (Holders). A key that gives an address up leaves
// it; the address is free only once its last holder left.
//
// A key with a sharing key and no address of its family yet joins the lowest
// address its group already holds that its groups allow; when every such
// address refuses it (a port collision, too many ports, different Local
// endpoints, full) it stays without one and the error says why, naming the
// other key and the port: a collision is a mistake to fix, not a reason to
// split the group. Only when the key's group holds no address yet does it get
// a free one.

// Sentinel errors of sharing (wrapped as the others, see Error).
var (
	ErrSharedPortCollision   = errors.New("port already used on the shared IP")
	ErrSharedEndpointsDiffer = errors.New("externalTrafficPolicy Local Services sharing an IP select different endpoints")
	ErrSharedIPFull          = errors.New("shared IP has the most holders it may have")
	ErrSharedTooManyPorts    = errors.New("shared IP would carry more ports than it may")
)

// MaxSharers is how many keys may hold one address (the ledger's limit).
const MaxSharers = 100

// MaxSharedPorts is how many ports the holders of one shared address may
// expose together. A Service may have tens of thousands of ports (with
// allocateLoadBalancerNodePorts false); the bound keeps the collision check
// of one sharing group short, since every allocation waits for it.
const MaxSharedPorts = 4096

// Port is a Service port as sharing compares them: protocol and number.
type Port struct {
	Protocol string
	Port     int32
}

func (p Port) String() string { return p.Protocol + "/" + strconv.Itoa(int(p.Port)) }

// Sharing is how a key may share its address.
type Sharing struct {
	// Key is the sharing key; empty: the key holds its address alone.
	Key string
	// Namespace of the key's Service.
	Namespace string
	// CrossNamespace are the other namespaces whose keys may share with
	// this one ("*": any).
	CrossNamespace []string
	// Ports the key's Service exposes.
	Ports []Port
	// LocalEndpoints names the endpoints of a Service with
	// externalTrafficPolicy Local (its namespace and selector); empty for
	// Cluster, which any node can carry.
	LocalEndpoints string
}

// Shares reports whether s asks to share at all.
func (s Sharing) Shares() bool { return s.Key != "" }

func (s Sharing) admitsNamespace(ns string) bool {
	return ns == s.Namespace || slices.Contains(s.CrossNamespace, "*") || slices.Contains(s.CrossNamespace, ns)
}

// sameGroup reports whether x and y may share an address at all: one sharing
// key, and each one's namespace allowed by the other.
func sameGroup(x, y Sharing) bool {
	return x.Shares() && x.Key == y.Key && x.admitsNamespace(y.Namespace) && y.admitsNamespace(x.Namespace)
}

// SetSharing records how key may share; Allocate does it from the request,
// the rebuild calls it before Assign.
func (a *Allocator) SetSharing(key string, s Sharing) {
	if !s.Shares() {
		delete(a.sharing, key)
		return
	}
	a.sharing[key] = s
	for _, addr := range a.held[key] {
		a.indexShared(s.Key, addr)
	}
}

// SharingOf is how key may share, as last recorded.
func (a *Allocator) SharingOf(key string) Sharing { return a.sharing[key] }

// Holders are the keys holding addr: its owner first, then those that joined.
func (a *Allocator) Holders(addr netip.Addr) []string {
	owner, ok := a.owner[addr]
	if !ok {
		return nil
	}
	return append([]string{owner}, a.joined[addr]...)
}

// holds reports whether key is one of addr's holders.
func (a *Allocator) holds(key string, addr netip.Addr) bool {
	return a.owner[addr] == key || slices.Contains(a.joined[addr], key)
}

func (a *Allocator) indexShared(sharingKey string, addr netip.Addr) {
	if a.byShareKey[sharingKey] == nil {
		a.byShareKey[sharingKey] = map[netip.Addr]struct{}{}
	}
	a.byShareKey[sharingKey][addr] = struct{}{}
}

// Leave makes key give addr up; the address is freed with its last holder.
func (a *Allocator) Leave(key string, addr netip.Addr) {
	others := slices.DeleteFunc(a.Holders(addr), func(k string) bool { return k == key })
	if len(others) == 0 {
		a.ReleaseAddr(addr)
		return
	}
	if !a.holds(key, addr) {
		return
	}
	a.owner[addr] = others[0]
	a.joined[addr] = others[1:]
	if len(a.joined[addr]) == 0 {
		delete(a.joined, addr)
	}
	a.dropHeld(key, addr)
}

// joinError says why key, sharing as s, may not hold addr together with its
// holders, or is nil. strict false only asks whether they are one sharing
// group (the rebuild imports what the ledger recorded, collisions and all).
func (a *Allocator) joinError(key string, s Sharing, addr netip.Addr, strict bool) error {
	holders := slices.DeleteFunc(a.Holders(addr), func(k string) bool { return k == key })
	for _, other := range holders {
		o, shares := a.sharing[other]
		switch {
		case !s.Shares() || !shares:
			return fail(ErrInUse, "%s is already held by %s", addr, holderName(key, other))
		case o.Key != s.Key:
			return fail(ErrInUse, "%s is already held by %s, shared under another sharing key (%q); give this Service that key to share it", addr, holderName(key, other), clipKey(o.Key))
		case !sameGroup(s, o):
			return fail(ErrInUse, "%s is already held by %s, which shares key %q across namespaces only with Services of the namespaces both list in vip.paas.org/sharing-cross-namespace; list each other's namespace on both sides",
				addr, holderName(key, other), clipKey(s.Key))
		}
	}
	if !strict || len(holders) == 0 {
		return nil
	}
	return a.fitError(s, addr, holders)
}

// fitError says why a Service sharing s, in one group with holders, does not fit on
// addr beside them: too many ports, a port in use, other Local endpoints, too
// many holders. The ports are counted before any is compared, so that the
// comparison, under the allocator's one lock, never sees more than
// MaxSharedPorts of them.
func (a *Allocator) fitError(s Sharing, addr netip.Addr, holders []string) error {
	carried := 0
	for _, other := range holders {
		carried += len(a.sharing[other].Ports)
	}
	if carried+len(s.Ports) > MaxSharedPorts {
		return fail(ErrSharedTooManyPorts, "%s is shared under key %q by %d Services with %d ports; with this Service's %d it would carry %d, and a shared address carries at most %d; use fewer ports, or another sharing key",
			addr, clipKey(s.Key), len(holders), carried, len(s.Ports), carried+len(s.Ports), MaxSharedPorts)
	}
	mine := newPortSet(s.Ports)
	for _, other := range holders {
		o := a.sharing[other]
		if p, ok := mine.firstIn(o.Ports); ok {
			return fail(ErrSharedPortCollision, "%s is shared under key %q by %s, which already uses port %s; give one of them another port, or another sharing key", addr, clipKey(s.Key), other, p)
		}
		if s.LocalEndpoints != "" && o.LocalEndpoints != "" && s.LocalEndpoints != o.LocalEndpoints {
			return fail(ErrSharedEndpointsDiffer, "%s is shared under key %q by %s; both have externalTrafficPolicy Local but select different endpoints (%s, %s), so no node may carry the address for both; give them the same selector, set externalTrafficPolicy Cluster on one, or use another sharing key",
				addr, clipKey(s.Key), other, o.LocalEndpoints, s.LocalEndpoints)
		}
	}
	if len(holders) >= MaxSharers {
		return fail(ErrSharedIPFull, "%s already has %d holders sharing key %q, the most one address may have; use another sharing key", addr, len(holders), clipKey(s.Key))
	}
	return nil
}

// sharedAddress finds the address of fam key's sharing group holds that key
// may join (the lowest, for a stable choice). found is false when the group
// holds none its groups allow; err says why none of those takes key.
func (a *Allocator) sharedAddress(key string, fam Family, req Request) (addr netip.Addr, found bool, err error) {
	s := req.Sharing
	if !s.Shares() {
		return netip.Addr{}, false, nil
	}
	var candidates []netip.Addr
	for addr := range a.byShareKey[s.Key] {
		holders := a.Holders(addr)
		_, inUse := a.InUseOnLAN(addr)
		if len(holders) == 0 || inUse || FamilyOf(addr) != fam || slices.Contains(holders, key) || !a.allowed(addr, req) {
			continue
		}
		if a.joinError(key, s, addr, false) != nil {
			continue // another group with that key (or stale index entry)
		}
		candidates = append(candidates, addr)
	}
	slices.SortFunc(candidates, netip.Addr.Compare)
	var errs []error
	for _, addr := range candidates {
		if err := a.joinError(key, s, addr, true); err != nil {
			errs = append(errs, err)
			continue
		}
		return addr, true, nil
	}
	if len(errs) > 0 {
		return netip.Addr{}, true, errs[0]
	}
	return netip.Addr{}, false, nil
}

// clipKey shortens a sharing key for a message (keys are validated, but the
// message must not depend on that).
func clipKey(k string) string {
	if len(k) > 63 {
		return k[:63] + "..."
	}
	return strings.ToValidUTF8(k, "?")
}

// keepable reports whether key may keep addr, which it holds, as far as
// sharing goes: it holds it alone, or in one sharing group with the others.
func (a *Allocator) keepable(key string, s Sharing, addr netip.Addr) bool {
	return a.joinError(key, s, addr, false) == nil
}

// sharingError is the collision a held shared address shows now (an edit
// since it was joined), to report while key keeps it.
func (a *Allocator) sharingError(key string, s Sharing, addr netip.Addr) error {
	if len(a.Holders(addr)) < 2 {
		return nil
	}
	err := a.joinError(key, s, addr, true)
	if errors.Is(err, ErrSharedIPFull) {
		return nil // it is in already
	}
	return err
}
