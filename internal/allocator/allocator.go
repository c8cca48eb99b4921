// Package allocator owns the in-memory map of which Service holds which address.
//
// It is pure: no Kubernetes imports, no I/O, no clock. The operator feeds it the
// parsed IPGroups (SetGroups), imports what the cluster already holds (Assign)
// before it allocates anything, and then asks it for addresses (Allocate). It
// never hands one address to two keys, and never enumerates a segment: free
// addresses are found from a per-group "lowest possibly free" hint, jumping over
// excluded ranges, so a /8 or an IPv6 /64 costs no more than a /24. It never
// hands out an address reserved in the cluster (SetReserved, reserved.go), and
// an address in overlapping groups only to a key every one of them admits
// (tenancy.go), and an address a key asked for and released only to that key
// until its lease ends (lease.go).
//
// It is not safe for concurrent use; the caller serialises access.
package allocator

import (
	"cmp"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
)

// Family is an address family, spelled as in a Service's spec.ipFamilies.
type Family string

// The two families.
const (
	IPv4 Family = "IPv4"
	IPv6 Family = "IPv6"
)

// FamilyOf returns the family of addr.
func FamilyOf(addr netip.Addr) Family {
	if addr.Is4() {
		return IPv4
	}
	return IPv6
}

// Sentinel errors: every error Allocate and Assign return wraps exactly one.
var (
	ErrNoGroup          = errors.New("no IPGroup")
	ErrGroupFull        = errors.New("IPGroup full")
	ErrInUse            = errors.New("requested IP in use")
	ErrExcluded         = errors.New("requested IP excluded")
	ErrOutsideGroups    = errors.New("requested IP outside every IPGroup")
	ErrGroupNotAllowed  = errors.New("IPGroup not allowed")
	ErrFamilyNotAllowed = errors.New("requested IP of a family the Service does not use")
	ErrReserved         = errors.New("requested IP reserved in the cluster")
)

// Error carries a message a person can act on and the sentinel it stands for.
type Error struct {
	Reason error
	Msg    string
}

func (e *Error) Error() string { return e.Msg }
func (e *Error) Unwrap() error { return e.Reason }

func fail(reason error, format string, args ...any) error {
	return &Error{Reason: reason, Msg: fmt.Sprintf(format, args...)}
}

// Request is what a Service asks for.
type Request struct {
	// Families in the Service's order (spec.ipFamilies): one address each.
	Families []Family
	// IPs the Service asks for, at most one per family.
	IPs []netip.Addr
	// Groups the Service names; empty means any auto-assign group that admits it.
	Groups []string
	// Labels of the Service's namespace and of the Service, for group selectors.
	NamespaceLabels, ServiceLabels map[string]string
	// LocalPolicy: the Service has externalTrafficPolicy Local, which a
	// ClusterPolicyOnly group does not serve.
	LocalPolicy bool
	// Sharing says whether and with whom the Service may share its addresses (sharing.go).
	Sharing Sharing
	// Keep are addresses the key holds that it keeps even when no group that
	// admits it allows them any more: the group they came from protects them
	// until its admin releases them (relocate.go).
	Keep []netip.Addr
}

// Allocator maps addresses to the keys (namespace/name) that hold them.
type Allocator struct {
	groups []*Group              // by priority, then name
	owner  map[netip.Addr]string // the first holder
	held   map[string][]netip.Addr
	hints  map[hintKey]hint
	// joined are the holders after the first of shared addresses, in the
	// order they joined; sharing is how each key may share, byShareKey the
	// addresses taken by keys of each sharing key (may be stale: checked on use).
	joined     map[netip.Addr][]string
	sharing    map[string]Sharing
	byShareKey map[string]map[netip.Addr]struct{}
	// reserved are addresses held elsewhere in the cluster (reserved.go).
	reserved reservations
	// leases are released addresses kept for the key that asked for them (lease.go).
	leases map[netip.Addr]Lease
	// onLAN are addresses a host on the LAN uses, with its MAC and who
	// (onlan.go); flooding caches FloodingMACs over them (nil: stale).
	onLAN    map[netip.Addr]lanMark
	flooding map[string][]string
}

// hintKey names a group's part of one family: a dual-stack group has two hints.
type hintKey struct {
	group  string
	family Family
}

// hint is the lowest address of a group's family that may be free; full means none is.
type hint struct {
	from netip.Addr
	full bool
}

// New returns an empty allocator with no groups.
func New() *Allocator {
	return &Allocator{
		owner:      map[netip.Addr]string{},
		held:       map[string][]netip.Addr{},
		hints:      map[hintKey]hint{},
		joined:     map[netip.Addr][]string{},
		sharing:    map[string]Sharing{},
		byShareKey: map[string]map[netip.Addr]struct{}{},
		leases:     map[netip.Addr]Lease{},
	}
}

// SetGroups replaces the groups. Held addresses stay held, even when no group
// contains them any more: only Allocate moves a key off an address its groups
// no longer allow, and only when it can give it another (see relocate.go).
func (a *Allocator) SetGroups(groups []*Group) {
	a.groups = slices.Clone(groups)
	slices.SortFunc(a.groups, func(x, y *Group) int {
		return cmp.Or(cmp.Compare(x.Priority, y.Priority), strings.Compare(x.Name, y.Name))
	})
	a.hints = map[hintKey]hint{}
	a.flooding = nil
}

// Groups returns the groups, by priority then name.
func (a *Allocator) Groups() []*Group { return a.groups }

// Group returns the group called name.
func (a *Allocator) Group(name string) (*Group, bool) {
	for _, g := range a.groups {
		if g.Name == name {
			return g, true
		}
	}
	return nil, false
}

// Owner returns the key holding addr (its first holder when it is shared).
func (a *Allocator) Owner(addr netip.Addr) (string, bool) {
	k, ok := a.owner[addr]
	return k, ok
}

// Held returns the addresses key holds.
func (a *Allocator) Held(key string) []netip.Addr { return slices.Clone(a.held[key]) }

// inUseOf counts the held addresses of family fam that group g could hand out.
func (a *Allocator) inUseOf(g *Group, fam Family) int {
	n := 0
	for addr := range a.owner {
		if FamilyOf(addr) == fam && g.Usable(addr) {
			n++
		}
	}
	return n
}

// Assign records that key holds addrs, whatever the groups say: it imports what
// the cluster already holds. It is idempotent; an address held by another key
// is refused with ErrInUse, unless both are in one sharing group (SetSharing
// first), and the others are still assigned.
func (a *Allocator) Assign(key string, addrs ...netip.Addr) error {
	var errs []error
	for _, addr := range addrs {
		if a.holds(key, addr) {
			continue
		}
		if _, ok := a.owner[addr]; ok {
			if err := a.joinError(key, a.sharing[key], addr, false); err != nil {
				errs = append(errs, err)
				continue
			}
		}
		a.take(key, addr)
	}
	return errors.Join(errs...)
}

// Release makes key give up every address it holds and returns them; a
// shared address stays held by the others.
func (a *Allocator) Release(key string) []netip.Addr {
	addrs := slices.Clone(a.held[key])
	for _, addr := range addrs {
		a.Leave(key, addr)
	}
	delete(a.sharing, key)
	return addrs
}

// ReleaseAddr frees one address, whoever holds it (every holder of a shared one).
func (a *Allocator) ReleaseAddr(addr netip.Addr) {
	holders := a.Holders(addr)
	if len(holders) == 0 {
		return
	}
	delete(a.owner, addr)
	delete(a.joined, addr)
	for _, key := range holders {
		a.dropHeld(key, addr)
		if s, ok := a.sharing[key]; ok {
			delete(a.byShareKey[s.Key], addr)
			if len(a.byShareKey[s.Key]) == 0 {
				delete(a.byShareKey, s.Key)
			}
		}
	}
	a.rewindHints(addr)
}

// rewindHints moves the hints of the groups holding addr back to it: it is free.
func (a *Allocator) rewindHints(addr netip.Addr) {
	for _, g := range a.groups {
		k := hintKey{g.Name, FamilyOf(addr)}
		if h, ok := a.hints[k]; ok && g.Contains(addr) && (h.full || addr.Less(h.from)) {
			a.hints[k] = hint{from: addr}
		}
	}
}

// dropHeld removes addr from what key holds.
func (a *Allocator) dropHeld(key string, addr netip.Addr) {
	a.held[key] = slices.DeleteFunc(a.held[key], func(x netip.Addr) bool { return x == addr })
	if len(a.held[key]) == 0 {
		delete(a.held, key)
	}
}

// Allocate makes key hold one address per requested family and returns them in
// family order. It is idempotent: an address key already holds is kept while a
// group that admits the request allows it, unless the request names another
// valid one, which then replaces it. An address no admitting group allows any
// more is replaced as relocate.go describes. On failure key keeps what it held;
// the error joins one error per family that failed.
func (a *Allocator) Allocate(key string, req Request) ([]netip.Addr, error) {
	a.SetSharing(key, req.Sharing)
	var errs []error
	for _, addr := range req.IPs {
		if !slices.Contains(req.Families, FamilyOf(addr)) {
			errs = append(errs, fail(ErrFamilyNotAllowed,
				"requested %s is %s but the Service's ipFamilies are %v; request an address of those families or change ipFamilies",
				addr, FamilyOf(addr), req.Families))
		}
	}
	if len(errs) > 0 {
		// The request is wrong as a whole: hand out nothing new until it is fixed.
		return a.heldIn(key, req.Families), errors.Join(errs...)
	}
	for _, fam := range req.Families {
		if err := a.allocateFamily(key, fam, req); err != nil {
			errs = append(errs, err)
		}
	}
	// A family the Service no longer uses (dual-stack turned single) is released.
	for _, addr := range a.Held(key) {
		if !slices.Contains(req.Families, FamilyOf(addr)) {
			a.Leave(key, addr)
		}
	}
	return a.heldIn(key, req.Families), errors.Join(errs...)
}

// heldIn returns key's addresses in the order of families.
func (a *Allocator) heldIn(key string, families []Family) []netip.Addr {
	var out []netip.Addr
	for _, fam := range families {
		if addr, ok := a.heldOf(key, fam); ok {
			out = append(out, addr)
		}
	}
	return out
}

func (a *Allocator) allocateFamily(key string, fam Family, req Request) error {
	want, requests := requested(req, fam)
	var reqErr error
	if requests {
		if reqErr = a.checkRequested(key, want, req); reqErr == nil {
			if !a.holds(key, want) {
				a.take(key, want)
			}
			a.keepOnly(key, fam, want)
			return nil
		}
	}
	held := a.leaveInUseOnLAN(key, a.heldOfFamily(key, fam, want))
	i := slices.IndexFunc(held, func(addr netip.Addr) bool { return a.allowed(addr, req) && a.keepable(key, req.Sharing, addr) })
	if i < 0 {
		// An interrupted move finishes on the allowed address; a protected
		// one stays only when there is none.
		i = slices.IndexFunc(held, func(addr netip.Addr) bool {
			return slices.Contains(req.Keep, addr) && a.keepable(key, req.Sharing, addr)
		})
	}
	if i >= 0 {
		a.keepOnly(key, fam, held[i])
		if reqErr == nil {
			// Still held, but an edit may have made it collide: say so.
			return a.sharingError(key, req.Sharing, held[i])
		}
		return reqErr
	}
	if len(held) > 0 && keepsStrandedAddress(reqErr) {
		a.keepOnly(key, fam, held[0])
		return reqErr
	}
	if len(held) == 0 && reqErr != nil {
		// A Service that holds nothing gets what it asks for or nothing.
		return reqErr
	}
	addr, found, err := a.sharedAddress(key, fam, req)
	if !found {
		addr, err = a.nextFree(key, fam, req)
	}
	if err != nil {
		if len(held) > 0 {
			// Never IP-less because of an edit: it keeps the address it has.
			a.keepOnly(key, fam, held[0])
			err = &relocationError{held: held[0], cause: err}
		}
		if reqErr != nil {
			return errors.Join(reqErr, err)
		}
		return err
	}
	a.take(key, addr)
	a.keepOnly(key, fam, addr)
	return reqErr
}

// nextFree takes nothing: it finds the lowest free address of the first group,
// by priority, that an unrequested address of fam may come from. A dual-stack
// Service takes both its addresses from one group where it can (sameGroupFirst).
func (a *Allocator) nextFree(key string, fam Family, req Request) (netip.Addr, error) {
	candidates, err := a.candidates(fam, req)
	if err != nil {
		return netip.Addr{}, err
	}
	candidates = a.sameGroupFirst(key, candidates, req)
	for _, g := range candidates {
		if addr, ok := a.firstFree(g, fam, req); ok {
			return addr, nil
		}
	}
	return netip.Addr{}, a.fullError(fam, candidates)
}

// sameGroupFirst orders candidates for a dual-stack Service: first the group
// that already gave it an address of another family, then the groups that
// have every family it asks for, then the rest, each by priority. A
// single-stack Service keeps the priority order.
func (a *Allocator) sameGroupFirst(key string, candidates []*Group, req Request) []*Group {
	if len(req.Families) < 2 {
		return candidates
	}
	rank := func(g *Group) int {
		for _, addr := range a.held[key] {
			if g.Usable(addr) {
				return 0
			}
		}
		if !slices.ContainsFunc(req.Families, func(f Family) bool { return !g.HasFamily(f) }) {
			return 1
		}
		return 2
	}
	out := slices.Clone(candidates)
	slices.SortStableFunc(out, func(x, y *Group) int { return cmp.Compare(rank(x), rank(y)) })
	return out
}

// checkRequested explains why key may not take addr, or returns nil. An
// address key already holds is not refused for being reserved or fenced off
// since: that is a conflict to report, not a reason to move it.
func (a *Allocator) checkRequested(key string, addr netip.Addr, req Request) error {
	var containing, usable []*Group
	for _, g := range a.groups {
		if g.Contains(addr) {
			containing = append(containing, g)
			if !g.IsExcluded(addr) {
				usable = append(usable, g)
			}
		}
	}
	switch {
	case SubnetRouterAnycast(addr) && len(containing) > 0:
		return fail(ErrExcluded,
			"requested %s is the subnet-router anycast address of its /64, which every forwarding node on that link answers for; request another address", addr)
	case len(containing) == 0:
		return fail(ErrOutsideGroups,
			"requested %s is in no IPGroup; request an address inside an IPGroup's segment or create an IPGroup that holds it", addr)
	case len(usable) == 0 && !slices.ContainsFunc(containing, func(g *Group) bool { _, ok := g.excludedSpanAt(addr); return ok }):
		return fail(ErrExcluded,
			"requested %s ends in .0 or .255, which IPGroup %s never hands out (spec.avoidBuggyIPs); request another address", addr, names(containing))
	case len(usable) == 0:
		return fail(ErrExcluded,
			"requested %s is excluded from IPGroup %s (spec.excludedIPs); request another address", addr, names(containing))
	}
	if who, inUse := a.InUseOnLAN(addr); inUse {
		return fail(ErrInUseOnLAN, "requested %s is in use on the LAN: %s answered the probe sent before its first announcement, so no node announces it; free the address on that host, or request another address", addr, who)
	}
	mine := a.holds(key, addr)
	if !mine {
		if err := a.checkReserved(addr, &usable); err != nil {
			return err
		}
	}
	if !slices.ContainsFunc(usable, func(g *Group) bool { return a.admits(g, req) }) {
		return fail(ErrGroupNotAllowed, "requested %s is in IPGroup %s, %s", addr, names(usable), whyNotAdmitted(req, usable))
	}
	if !mine {
		if fence, ok := a.fencedBy(nil, addr, req); ok {
			return fail(ErrGroupNotAllowed,
				"requested %s is in IPGroup %s, whose namespaceSelector or serviceSelector does not match this Service; an address in overlapping groups goes only to Services every one of them admits: request another address, or change the selectors or the Service's labels",
				addr, fence.Name)
		}
	}
	if err := a.leaseError(key, addr); err != nil {
		return err
	}
	if _, ok := a.owner[addr]; ok && !mine {
		if err := a.joinError(key, req.Sharing, addr, true); err != nil {
			var e *Error
			if errors.As(err, &e) && errors.Is(err, ErrInUse) {
				return fail(ErrInUse, "requested %s; request a free address or release it there", e.Msg)
			}
			return err
		}
	}
	return nil
}

// checkReserved drops from usable the groups for which addr is reserved, and
// refuses addr when none is left.
func (a *Allocator) checkReserved(addr netip.Addr, usable *[]*Group) error {
	var holder Reservation
	free := slices.DeleteFunc(slices.Clone(*usable), func(g *Group) bool {
		r, reserved := a.ReservedIn(g, addr)
		if reserved && holder.Holder == "" {
			holder = r
		}
		return reserved
	})
	if len(free) == 0 {
		return fail(ErrReserved, "requested %s is %s, reserved in the cluster and never handed out; request another address", addr, holder.Holder)
	}
	*usable = free
	return nil
}

// candidates are the groups an unrequested address of fam may come from.
func (a *Allocator) candidates(fam Family, req Request) ([]*Group, error) {
	if len(req.Groups) > 0 {
		var named []*Group
		var missing []string
		for _, name := range req.Groups {
			g, ok := a.Group(name)
			switch {
			case !ok:
				missing = append(missing, name)
			case g.HasFamily(fam):
				named = append(named, g)
			}
		}
		if len(named) == 0 {
			if len(missing) > 0 {
				return nil, fail(ErrNoGroup, "IPGroup %s does not exist; create it or name an existing group in vip.paas.org/ipgroup", strings.Join(missing, ", "))
			}
			return nil, fail(ErrNoGroup, "none of the named IPGroups %s is %s; name one %s group per family in vip.paas.org/ipgroup", strings.Join(req.Groups, ", "), fam, fam)
		}
		admitted := slices.DeleteFunc(slices.Clone(named), func(g *Group) bool { return !a.admits(g, req) })
		if len(admitted) == 0 {
			if req.LocalPolicy && slices.ContainsFunc(named, func(g *Group) bool { return g.ClusterPolicyOnly }) {
				return nil, fail(ErrGroupNotAllowed, "IPGroup %s %s", strings.Join(req.Groups, ", "), clusterPolicyOnly)
			}
			return nil, fail(ErrGroupNotAllowed, "IPGroup %s does not admit this Service: its namespaceSelector or serviceSelector does not match", strings.Join(req.Groups, ", "))
		}
		return admitted, nil
	}
	var auto []*Group
	for _, g := range a.groups {
		if NotAdmitted(g, fam, req) == "" {
			auto = append(auto, g)
		}
	}
	if len(auto) == 0 {
		return nil, fail(ErrNoGroup, "no auto-assign %s IPGroup admits this Service; create one, or name a group in the vip.paas.org/ipgroup annotation", fam)
	}
	return auto, nil
}

func (a *Allocator) fullError(fam Family, groups []*Group) error {
	var parts []string
	for _, g := range groups {
		part := fmt.Sprintf("%s (%d of %s in use", g.Name, a.inUseOf(g, fam), g.FamilyCapacity(fam))
		if r := a.ReservedCount(g); r.Sign() > 0 {
			part += fmt.Sprintf(", %s reserved in the cluster", r)
		}
		if n := a.leasedIn(g, fam); n > 0 {
			part += fmt.Sprintf(", %d kept for Services that released them", n)
		}
		if n := a.inUseOnLANIn(g, fam); n > 0 {
			part += fmt.Sprintf(", %d in use on the LAN", n)
		}
		parts = append(parts, part+")")
	}
	return fail(ErrGroupFull, "no free %s address in IPGroup %s; add addresses to a group, create another group, or free an address",
		fam, strings.Join(parts, ", "))
}

func (a *Allocator) admits(g *Group, req Request) bool { return Admits(g, req) }

// Admits reports whether g may give req's Service an address: the Service
// names no group or names g, g's selectors match it, and g serves its
// externalTrafficPolicy.
func Admits(g *Group, req Request) bool {
	if len(req.Groups) > 0 && !slices.Contains(req.Groups, g.Name) {
		return false
	}
	if g.ClusterPolicyOnly && req.LocalPolicy {
		return false
	}
	return g.Admits == nil || g.Admits(req.NamespaceLabels, req.ServiceLabels)
}

// clusterPolicyOnly says why a ClusterPolicyOnly group refuses a Local Service.
const clusterPolicyOnly = "advertises one route covering many VIPs from every node (announce.bgp.aggregationLength), " +
	"which serves only externalTrafficPolicy Cluster: set the Service's policy to Cluster, or use a group without aggregationLength"

// whyNotAdmitted says why none of groups admits req's Service.
func whyNotAdmitted(req Request, groups []*Group) string {
	if req.LocalPolicy && slices.ContainsFunc(groups, func(g *Group) bool { return g.ClusterPolicyOnly }) {
		return "which " + clusterPolicyOnly
	}
	if len(req.Groups) > 0 {
		return fmt.Sprintf("but the Service names IPGroup %s in vip.paas.org/ipgroup; name the group that holds the address", strings.Join(req.Groups, ", "))
	}
	return "whose namespaceSelector or serviceSelector does not match this Service; change the selectors or the Service's labels"
}

// firstFree returns the lowest free usable address of g that req's Service
// may have, starting at g's hint. The hint moves over what is taken or
// reserved, which no Service may have, never over an address fenced off for
// this Service only (tenancy.go).
func (a *Allocator) firstFree(g *Group, fam Family, req Request) (netip.Addr, bool) {
	k := hintKey{g.Name, fam}
	h, ok := a.hints[k]
	if !ok {
		first, has := g.firstOf(fam)
		if !has {
			return netip.Addr{}, false
		}
		h = hint{from: first}
	}
	if h.full {
		return netip.Addr{}, false
	}
	moveHint := true
	for from := h.from; ; from = from.Next() {
		addr, ok := g.nextUsable(from)
		if !ok {
			if moveHint {
				a.hints[k] = hint{full: true}
			}
			return netip.Addr{}, false
		}
		if s, ok := a.reservedSpanAt(g, addr); ok {
			from = s.last
			continue
		}
		if fence, ok := a.fencedBy(g, addr, req); ok {
			if moveHint {
				a.hints[k], moveHint = hint{from: addr}, false
			}
			from = fence.runEnd(addr)
			continue
		}
		_, leased := a.leases[addr]
		_, inUse := a.InUseOnLAN(addr)
		if _, taken := a.owner[addr]; !taken && !leased && !inUse {
			if moveHint {
				a.hints[k] = hint{from: addr}
			}
			return addr, true
		}
		from = addr
	}
}

// keepOnly releases every address of fam that key holds but addr. A key holds
// one address per family; more can only come from importing an interrupted move.
func (a *Allocator) keepOnly(key string, fam Family, addr netip.Addr) {
	for _, other := range a.Held(key) {
		if other != addr && FamilyOf(other) == fam {
			a.Leave(key, other)
		}
	}
}

// take makes key hold addr: as its owner when it is free, else joining it.
func (a *Allocator) take(key string, addr netip.Addr) {
	delete(a.leases, addr) // its holder is back, or the ledger says another key has it
	if _, held := a.owner[addr]; held {
		a.joined[addr] = append(a.joined[addr], key)
	} else {
		a.owner[addr] = key
	}
	a.held[key] = append(a.held[key], addr)
	if s, ok := a.sharing[key]; ok {
		a.indexShared(s.Key, addr)
	}
}

func (a *Allocator) heldOf(key string, fam Family) (netip.Addr, bool) {
	for _, addr := range a.held[key] {
		if FamilyOf(addr) == fam {
			return addr, true
		}
	}
	return netip.Addr{}, false
}

// heldOfFamily returns the addresses of fam key holds, in import order but with
// prefer first. More than one means an interrupted move was imported.
func (a *Allocator) heldOfFamily(key string, fam Family, prefer netip.Addr) []netip.Addr {
	var out []netip.Addr
	for _, addr := range a.held[key] {
		if FamilyOf(addr) == fam {
			out = append(out, addr)
		}
	}
	if i := slices.Index(out, prefer); i > 0 {
		out = slices.Insert(slices.Delete(out, i, i+1), 0, prefer)
	}
	return out
}

func requested(req Request, fam Family) (netip.Addr, bool) {
	for _, addr := range req.IPs {
		if FamilyOf(addr) == fam {
			return addr, true
		}
	}
	return netip.Addr{}, false
}

func names(groups []*Group) string {
	var out []string
	for _, g := range groups {
		out = append(out, g.Name)
	}
	return strings.Join(out, ", ")
}

// Admissible explains why key may not hold addr under req, as Allocate would refuse it if req
// asked for addr, or returns nil. It changes nothing.
func (a *Allocator) Admissible(key string, addr netip.Addr, req Request) error {
	return a.checkRequested(key, addr, req)
}
