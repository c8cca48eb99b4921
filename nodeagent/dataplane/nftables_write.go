package dataplane

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"unsafe"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// This file writes the nftables plane's transactions.
//
// A full Sync must never leave traffic without rules, yet one transaction holding all 120,000
// elements of 10,000 Services is a ~10 MB message batch that google/nftables and netlink copy
// three times over (~60 MB of memory). So a full Sync double-buffers the data: it fills a new
// generation of every set and map (names ending in _a or _b, whichever the rules do not use) in
// transactions of ~256 KB, which change no packet's fate since no rule refers to them yet; then
// one small transaction rewrites every chain's rules to use the new generation and deletes the
// old one. Rewriting every rule and every set also repairs any drift.

const (
	// elemMsgBytes bounds one message's element list: its netlink attribute length is 16 bits.
	elemMsgBytes = 48 << 10
	// elemTxBytes bounds the elements of one transaction of a full Sync.
	elemTxBytes = 256 << 10
)

// writeFull writes every chain, rule, set and element of st (see above).
func (n *NFTables) writeFull(st *nftState) (rules, chains int, err error) {
	conn, err := nftConn()
	if err != nil {
		return 0, 0, fmt.Errorf("netlink: %w", err)
	}
	inUse, existing, err := n.inspectSets(conn)
	if err != nil {
		return 0, 0, err
	}
	b := &nftBatch{Conn: conn}
	gen := "a"
	switch {
	case inUse["a"] && inUse["b"]: // only after someone rewrote our rules: start afresh
		b.AddTable(n.layout.table)
		b.DelTable(n.layout.table)
		existing = nil
	case inUse["a"]:
		gen = "b"
	}
	l := n.layout.withGen(gen)
	b.AddTable(l.table)
	for _, name := range existing {
		if strings.HasSuffix(name, "_"+gen) && name != nftClientsMap { // left by a full Sync that failed half-way
			b.DelSet(&nftables.Set{Table: l.table, Name: name})
		}
	}
	sets := l.declareSets(b, st.maps, st.affinity)
	q := newElemQueue(b, sets, false)
	q.txBytes = elemTxBytes
	st.each(q.put)
	q.flushAll()
	// The switch: one transaction, so packets see the old rules or the new.
	rules, chains = l.queueRules(b, sets, st.maps, st.affinity)
	for _, name := range existing {
		if !strings.HasSuffix(name, "_"+gen) && name != nftClientsMap {
			b.DelSet(&nftables.Set{Table: l.table, Name: name})
		}
	}
	if err := b.flush(); err != nil {
		return rules, chains, err
	}
	n.gen = gen
	return rules, chains, l.deleteClients(conn, st.stale(int(l.addrLen)))
}

// inspectSets finds the set generations our rules use and the names of every set in our table.
func (n *NFTables) inspectSets(c *nftables.Conn) (inUse map[string]bool, names []string, err error) {
	t := n.layout.table
	inUse = map[string]bool{}
	if ok, err := tableExists(c, t); err != nil || !ok {
		return inUse, nil, err
	}
	sets, err := c.GetSets(t)
	if err != nil {
		return nil, nil, fmt.Errorf("list sets: %w", err)
	}
	for _, s := range sets {
		names = append(names, s.Name)
	}
	for _, chain := range []string{nftServices, nftRejectVIPs} {
		rules, err := c.GetRules(t, &nftables.Chain{Name: chain, Table: t})
		if err != nil {
			continue // no chain, no reference
		}
		for _, r := range rules {
			for _, e := range r.Exprs {
				if lk, ok := e.(*expr.Lookup); ok {
					if i := strings.LastIndexByte(lk.SetName, '_'); i >= 0 {
						inUse[lk.SetName[i+1:]] = true
					}
				}
			}
		}
	}
	return inUse, names, nil
}

// declareSets queues the fixed sets, the clients map (kept if it exists), the endpoint maps of
// endpointMaps and the sets of the session affinities of affinity, and returns them by id.
func (l *nftLayout) declareSets(b *nftBatch, endpointMaps map[int]bool, affinity map[uint32]bool) map[setID]*nftables.Set {
	sets := map[setID]*nftables.Set{setClients: l.set(setClients)}
	for _, id := range fixedSets {
		sets[id] = l.set(id)
	}
	for k := range endpointMaps {
		sets[endpointsSet(k)] = l.set(endpointsSet(k))
	}
	for secs := range affinity {
		sets[affinitySet(secs)] = l.set(affinitySet(secs))
	}
	for _, id := range slices.Sorted(maps.Keys(sets)) {
		b.check(b.AddSet(sets[id], nil))
	}
	return sets
}

// queueRules declares every chain (creating what is missing), empties it and fills it again.
func (l *nftLayout) queueRules(b *nftBatch, sets map[setID]*nftables.Set, endpointMaps map[int]bool, affinity map[uint32]bool) (rules, chains int) {
	fixed := l.fixedRules(sets)
	for _, ch := range l.chains() {
		b.AddChain(ch)
		b.FlushChain(ch)
		chains++
		for _, r := range fixed[ch.Name] {
			b.AddRule(&nftables.Rule{Table: l.table, Chain: ch, Exprs: r})
			rules++
		}
		var more [][]expr.Any
		switch ch.Name {
		case nftServices:
			for _, k := range slices.Sorted(maps.Keys(endpointMaps)) {
				more = append(more, l.dnatRule(sets[endpointsSet(k)], k))
			}
		case nftAffinityLookup, nftAffinityRecord:
			for _, secs := range slices.Sorted(maps.Keys(affinity)) {
				more = append(more, l.affinityRule(ch.Name, sets, secs))
			}
		}
		for _, r := range more {
			b.AddRule(&nftables.Rule{Table: l.table, Chain: ch, Exprs: r})
			rules++
		}
	}
	return rules, chains
}

// affinityRule is the rule of chain (nftAffinityLookup or nftAffinityRecord) for the ports
// with session affinity of secs seconds.
func (l *nftLayout) affinityRule(chain string, sets map[setID]*nftables.Set, secs uint32) []expr.Any {
	if chain == nftAffinityLookup {
		return l.affinityLookupRule(sets[affinitySet(secs)], sets[setClients])
	}
	return l.affinityRecordRule(sets[affinitySet(secs)], sets[setClients], secs)
}

// writeChanges writes a partial Sync in one transaction: new endpoint maps with their DNAT
// rule, then element deletions and additions.
func (n *NFTables) writeChanges(p *nftPlan) (rules int, err error) {
	conn, err := nftConn()
	if err != nil {
		return 0, fmt.Errorf("netlink: %w", err)
	}
	b := &nftBatch{Conn: conn}
	l := n.layout.withGen(n.gen)
	sets := map[setID]*nftables.Set{setClients: l.set(setClients)}
	for _, k := range p.newMaps {
		s := l.set(endpointsSet(k))
		b.check(b.AddSet(s, nil))
		b.AddRule(&nftables.Rule{Table: l.table, Chain: &nftables.Chain{Name: nftServices, Table: l.table}, Exprs: l.dnatRule(s, k)})
		sets[endpointsSet(k)] = s
		rules++
	}
	for _, secs := range p.newAffinity {
		s := l.set(affinitySet(secs))
		b.check(b.AddSet(s, nil))
		sets[affinitySet(secs)] = s
		for _, chain := range []string{nftAffinityLookup, nftAffinityRecord} {
			b.AddRule(&nftables.Rule{Table: l.table, Chain: &nftables.Chain{Name: chain, Table: l.table}, Exprs: l.affinityRule(chain, sets, secs)})
			rules++
		}
	}
	for _, e := range slices.Concat(p.del, p.add) {
		if sets[e.set] == nil {
			sets[e.set] = l.set(e.set)
		}
	}
	for _, step := range []struct {
		del   bool
		elems []nftElem
	}{{true, p.del}, {false, p.add}} {
		q := newElemQueue(b, sets, step.del)
		for _, e := range step.elems {
			q.put(e)
		}
		q.flushAll()
	}
	if err := b.flush(); err != nil || len(p.forget) == 0 {
		return rules, err
	}
	return rules, l.deleteClients(conn, p.forgets(int(l.addrLen)))
}

// elemQueue queues elements into messages of at most elemMsgBytes, one set per message, and,
// when txBytes is set, sends a transaction whenever that much is queued.
type elemQueue struct {
	b       *nftBatch
	sets    map[setID]*nftables.Set
	del     bool
	txBytes int

	batch  map[setID][]nftables.SetElement // reused: google/nftables copies what it marshals
	size   map[setID]int
	queued int // bytes since the last transaction
}

func newElemQueue(b *nftBatch, sets map[setID]*nftables.Set, del bool) *elemQueue {
	return &elemQueue{b: b, sets: sets, del: del, batch: map[setID][]nftables.SetElement{}, size: map[setID]int{}}
}

func (q *elemQueue) put(e nftElem) {
	// The library only reads keys and data, so they alias our strings instead of copying
	// 120,000 of them on a full Sync.
	el := nftables.SetElement{Key: bytesOf(e.key), KeyEnd: bytesOf(e.end), Val: bytesOf(e.val)}
	q.batch[e.set] = append(q.batch[e.set], el)
	size := 32 + len(e.key) + len(e.end) + len(e.val) // with attribute headers and padding
	q.size[e.set] += size
	q.queued += size
	if q.size[e.set] > elemMsgBytes {
		q.flush(e.set)
	}
	if q.txBytes > 0 && q.queued > q.txBytes {
		q.flushAll()
		q.b.check(q.b.flush())
		q.queued = 0
	}
}

func (q *elemQueue) flush(id setID) {
	if len(q.batch[id]) == 0 {
		return
	}
	if q.del {
		q.b.check(q.b.SetDeleteElements(q.sets[id], q.batch[id]))
	} else {
		q.b.check(q.b.SetAddElements(q.sets[id], q.batch[id]))
	}
	q.batch[id], q.size[id] = q.batch[id][:0], 0
}

func (q *elemQueue) flushAll() {
	for _, id := range slices.Sorted(maps.Keys(q.batch)) {
		q.flush(id)
	}
}

// bytesOf is s as a byte slice without a copy, nil when empty; it must never be written to.
func bytesOf(s string) []byte {
	if s == "" {
		return nil
	}
	return unsafe.Slice(unsafe.StringData(s), len(s)) //nolint:gosec // a read-only view: no caller writes to it
}
