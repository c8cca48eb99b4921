package ipgroup

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/reserved"
)

// A change to one Node or one IPGroup reconciles only the groups it touches,
// and a group's reconcile reads only the ledger objects it counts: with
// thousands of groups and a hundred thousand addresses, neither may parse
// every group nor copy every ledger object (docs/performance.md).

// groupCatalog is the IPGroups as parsed, each once per generation, and an
// index of their parts by address, so that a question about an address or
// a range costs a binary search, not a pass over every group. It is read
// from the informer cache once, then kept by the IPGroup events and the
// reconciles (observe, forget): an event costs the parse of one group and
// the re-sort of the index, not a read of every group.
type groupCatalog struct {
	// loaded is set once the catalog was read from the cache. Reading the
	// cache takes no lock: a read may wait for an informer to sync, whose
	// handlers take mu.
	loaded atomic.Bool

	mu      sync.Mutex
	entries map[string]*catalogEntry
	// spans are every group's parts, by first address; maxLast[i] is the
	// highest last address among spans[:i+1] (overlapping groups are
	// allowed). stale: entries changed since they were built.
	spans   []catalogSpan
	maxLast []netip.Addr
	stale   bool
	// gone are the uids of deleted groups: a reconcile that read one just
	// before its deletion must not bring it back.
	gone map[types.UID]bool
}

// catalogEntry is one IPGroup as parsed.
type catalogEntry struct {
	uid        types.UID
	generation int64
	parsed     *allocator.Group // nil when its spec is unusable
	parts      string           // spec.DescribeParts()
	mode       paasv1.AnnounceMode
	candidacy  election.Candidacy
}

type catalogSpan struct {
	first, last netip.Addr
	group       string
}

func newGroupCatalog() *groupCatalog {
	return &groupCatalog{entries: map[string]*catalogEntry{}, gone: map[types.UID]bool{}}
}

// observe records group as it is now, unless the catalog holds as recent a
// generation of it (an event may arrive after the reconcile that read it).
func (c *groupCatalog) observe(group *paasv1.IPGroup) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.observeLocked(group)
}

func (c *groupCatalog) observeLocked(group *paasv1.IPGroup) {
	if e := c.entries[group.Name]; c.gone[group.UID] || e != nil && e.uid == group.UID && e.generation >= group.Generation {
		return
	}
	c.entries[group.Name] = newCatalogEntry(group)
	c.stale = true
}

// forget drops the group called name with uid: it was deleted.
func (c *groupCatalog) forget(name string, uid types.UID) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.gone[uid] = true
	if e := c.entries[name]; e != nil && e.uid == uid {
		delete(c.entries, name)
		c.stale = true
	}
}

// load reads every group from r (the cache) the first time. Callers do not
// hold c.mu.
func (c *groupCatalog) load(ctx context.Context, r client.Reader) error {
	if c.loaded.Load() {
		return nil
	}
	var list paasv1.IPGroupList
	if err := r.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		return fmt.Errorf("list IPGroups: %w", err)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for i := range list.Items {
		c.observeLocked(&list.Items[i])
	}
	c.loaded.Store(true)
	return nil
}

// index rebuilds spans from entries when they changed. Callers hold c.mu.
func (c *groupCatalog) index() {
	if !c.stale && c.spans != nil {
		return
	}
	spans := make([]catalogSpan, 0, len(c.spans))
	for name, e := range c.entries {
		if e.parsed == nil {
			continue
		}
		for _, p := range e.parsed.Parts() {
			r := allocator.RangeOf(p)
			spans = append(spans, catalogSpan{first: r.First, last: r.Last, group: name})
		}
	}
	slices.SortFunc(spans, func(x, y catalogSpan) int { return x.first.Compare(y.first) })
	maxLast := make([]netip.Addr, len(spans))
	for i, s := range spans {
		maxLast[i] = s.last
		if i > 0 && maxLast[i-1].Compare(s.last) > 0 {
			maxLast[i] = maxLast[i-1]
		}
	}
	c.spans, c.maxLast, c.stale = spans, maxLast, false
}

func newCatalogEntry(g *paasv1.IPGroup) *catalogEntry {
	e := &catalogEntry{uid: g.UID, generation: g.Generation, parts: g.Spec.DescribeParts(), mode: election.ModeOf(g)}
	if parsed, err := k8salloc.Group(g); err == nil {
		e.parsed = parsed
	}
	e.candidacy, _ = election.CandidacyOf(g) // a bad selector selects no node
	return e
}

// overlapping returns the groups with a part overlapping [first, last], but
// skip. Callers hold c.mu (query).
func (c *groupCatalog) overlapping(first, last netip.Addr, skip string) []string {
	// The spans starting at or before last; walking back, stop where no
	// earlier span reaches first.
	i, _ := slices.BinarySearchFunc(c.spans, last, func(s catalogSpan, a netip.Addr) int {
		if s.first.Compare(a) <= 0 {
			return -1
		}
		return 1
	})
	var out []string
	for j := i - 1; j >= 0 && c.maxLast[j].Compare(first) >= 0; j-- {
		s := c.spans[j]
		if s.last.Compare(first) >= 0 && s.group != skip && !slices.Contains(out, s.group) {
			out = append(out, s.group)
		}
	}
	return out
}

// overlappingPrefixes is overlapping for each of prefixes, merged.
func (c *groupCatalog) overlappingPrefixes(prefixes []netip.Prefix, skip string) []string {
	var out []string
	for _, p := range prefixes {
		r := allocator.RangeOf(p.Masked())
		for _, g := range c.overlapping(r.First, r.Last, skip) {
			if !slices.Contains(out, g) {
				out = append(out, g)
			}
		}
	}
	return out
}

// groupsOverlapping returns the other groups overlapping any part of the
// parsed group g (nil: none). Callers hold c.mu (query).
func (c *groupCatalog) groupsOverlapping(g *allocator.Group, name string) []string {
	if g == nil {
		return nil
	}
	var out []string
	for _, other := range c.overlappingPrefixes(g.Parts(), name) {
		if o := c.entries[other]; o != nil && o.parsed != nil && g.Overlaps(o.parsed) {
			out = append(out, other)
		}
	}
	slices.Sort(out)
	return out
}

// groupsForNode returns the groups whose status a change of a Node from old
// to cur may change (nil old or cur: created or deleted): the groups that
// select it (announce.nodeSelector) when its labels changed; those that
// select it and could announce through it (BGP; L2 with a part on one of its
// interfaces, before or after) when its cordon, agent, exclusion or
// interfaces changed; those with a part on an address it reserves, before
// or after, when its reservations changed. Callers hold c.mu (query).
func (c *groupCatalog) groupsForNode(old, cur *corev1.Node, onCordon election.OnCordon) []string {
	var nodes []election.Node
	for _, n := range []*corev1.Node{old, cur} {
		if n != nil {
			nodes = append(nodes, onCordon.NodeOf(n))
		}
	}
	selects := func(name string) bool {
		e := c.entries[name]
		return e != nil && slices.ContainsFunc(nodes, func(n election.Node) bool { return election.Selects(e.candidacy, n) })
	}
	out := map[string]bool{}
	labelsChanged := old == nil || cur == nil || !maps.Equal(old.Labels, cur.Labels)
	canChanged := labelsChanged || nodes[0].Cordoned != nodes[len(nodes)-1].Cordoned || nodes[0].Agent != nodes[len(nodes)-1].Agent ||
		old.Annotations[paasv1.NodeInterfacesAnnotation] != cur.Annotations[paasv1.NodeInterfacesAnnotation]
	if labelsChanged {
		for name := range c.entries {
			if selects(name) {
				out[name] = true
			}
		}
	} else if canChanged {
		// An interface the node had before and after changes nothing, unless
		// the node itself can no longer (or now can) announce.
		var ifaces []netip.Prefix
		whole := nodes[0].Cordoned != nodes[1].Cordoned || nodes[0].Agent != nodes[1].Agent
		for i, n := range nodes {
			for _, ifc := range n.Interfaces {
				if whole || !slices.Contains(nodes[1-i].Interfaces, ifc) {
					ifaces = append(ifaces, ifc.Prefix)
				}
			}
		}
		for _, name := range c.overlappingPrefixes(ifaces, "") {
			if selects(name) {
				out[name] = true
			}
		}
		if nodes[0].Cordoned != nodes[1].Cordoned || nodes[0].Agent != nodes[1].Agent {
			for name, e := range c.entries {
				if e.mode == paasv1.AnnounceBGP && selects(name) {
					out[name] = true
				}
			}
		}
	}
	if old == nil || cur == nil || reserved.Changed(old, cur) {
		// What it reserves before and after, but what it reserves in both.
		var before, after []netip.Prefix
		if old != nil {
			before = reservedPrefixes(old)
		}
		if cur != nil {
			after = reservedPrefixes(cur)
		}
		var changed []netip.Prefix
		for _, p := range before {
			if !slices.Contains(after, p) {
				changed = append(changed, p)
			}
		}
		for _, p := range after {
			if !slices.Contains(before, p) {
				changed = append(changed, p)
			}
		}
		for _, name := range c.overlappingPrefixes(changed, "") {
			out[name] = true
		}
	}
	names := make([]string, 0, len(out))
	for name := range out {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// reservedPrefixes are the addresses and ranges n reserves. A claim on a
// subnet only a group's gateway confirms is not among them: such a change
// waits for the next resync of the groups.
func reservedPrefixes(n *corev1.Node) []netip.Prefix {
	var out []netip.Prefix
	for _, r := range k8salloc.Reservations([]corev1.Node{*n}, nil, nil, nil) {
		out = append(out, r.Prefix)
	}
	return out
}

// groupsOfMode returns the groups announced in mode. Callers hold c.mu (query).
func (c *groupCatalog) groupsOfMode(mode paasv1.AnnounceMode) []string {
	var out []string
	for name, e := range c.entries {
		if e.mode == mode {
			out = append(out, name)
		}
	}
	return out
}

// all returns every group's name. Callers hold c.mu (query).
func (c *groupCatalog) all() []string {
	out := make([]string, 0, len(c.entries))
	for name := range c.entries {
		out = append(out, name)
	}
	return out
}

// describe returns the parts of the group called name, as its spec says them.
// Callers hold c.mu (query).
func (c *groupCatalog) describe(name string) string {
	if e := c.entries[name]; e != nil {
		return e.parts
	}
	return ""
}

// parsed returns group parsed, from the catalog when it holds this
// generation. Callers hold c.mu.
func (c *groupCatalog) parsed(group *paasv1.IPGroup) (*allocator.Group, error) {
	if e := c.entries[group.Name]; e != nil && e.uid == group.UID && e.generation == group.Generation && e.parsed != nil {
		return e.parsed, nil
	}
	return k8salloc.Group(group)
}

// query runs f, under c.mu, with the catalog loaded from r and indexed.
func (c *groupCatalog) query(ctx context.Context, r client.Reader, f func()) error {
	if err := c.load(ctx, r); err != nil {
		return err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.index()
	f()
	return nil
}
