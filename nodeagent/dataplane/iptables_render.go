package dataplane

import (
	"bytes"
	"hash/maphash"
	"net/netip"
	"slices"
	"strings"
)

// Chains this package owns. Everything starting with chainPrefix is ours and nothing else is.
const (
	chainPrefix   = "VIPA-"
	chainServices = "VIPA-SERVICES"    // nat: VIP:port -> per-Service-port chain
	chainPost     = "VIPA-POSTROUTING" // nat: masquerade what carries our mark
	chainMasq     = "VIPA-MARK-MASQ"   // nat: set our mark
	chainFilter   = "VIPA-FILTER"      // filter: reject what nat did not DNAT, accept what it did
	chainCanary   = "VIPA-CANARY"      // nat and filter: gone means someone flushed us
	svcChainStem  = "VIPA-SVC-"        // nat: one chain per Service port, hashed name
	recentStem    = "VIPA-SEP-"        // a recent list per endpoint of a port with affinity (not a chain)
)

// tables is the order of tables in a payload.
var tables = []string{"filter", "nat"}

// hashSeed seeds change detection; hashes live only in memory, so any seed will do.
var hashSeed = maphash.MakeSeed()

// renderInput is everything a payload depends on: planning and writing do no I/O, so the
// rules are tested on text.
type renderInput struct {
	Family      Family
	Mark        uint32
	RandomFully bool
	Services    []Service
	// Last is the state after the last successful Sync; nil renders everything (a full sync).
	// Otherwise only what changed is written.
	Last *syncState
	// Existing lists, per table, VIPA- chains found in iptables; those no longer rendered are
	// deleted. Only a full sync looks them up.
	Existing map[string][]string
	// MissingJumps are jump rules into our chains that a full sync found missing: the payload
	// inserts them at position 1, so one commit brings chains and jumps. (One iptables -I per
	// jump instead costs ~0.8 s each on legacy at 10,000 Services: it rewrites the table.)
	MissingJumps []jump
}

// syncState is what a Sync remembers to decide what the next partial Sync rewrites.
type syncState struct {
	services map[string]serviceState // by namespace/name
	// Hashes of the two big top-level chains: at 10,000 Services each holds ~20,000 rules,
	// and rewriting them costs the nft backend ~1 s, so a partial Sync skips them when equal.
	servicesHash, filterHash uint64
}

// serviceState is what a Sync remembers of one Service.
type serviceState struct {
	hash   uint64   // of its rendered nat chains, names included
	chains []string // its nat chains
}

// chainItem is one chain in the nat payload: a Service port's chain, or a stale chain.
type chainItem struct {
	name  string
	svc   *Service
	port  int  // index in svc.Ports
	write bool // its Service changed: declare and fill it
	stale bool // flush and delete it
}

// plan is what one Sync writes, decided before any of it is spelled: a partial Sync at
// 10,000 Services compares ~140,000 rules to write a handful.
type plan struct {
	r                                *renderer
	jumps                            []jump // to insert
	full, writeServices, writeFilter bool
	filter                           bytes.Buffer // VIPA-FILTER rules, 3 per VIP
	nfilter                          int
	emit                             []chainItem // nat Service chains to write, delete or jump to
	staleOther                       map[string][]string
	state                            *syncState // to keep once the payload is applied
}

// makePlan spells every Service's chains into scratch space, hashes them, compares with
// in.Last and lists what changed. The chains it names for writing are spelled again by write:
// spelling twice costs less than holding a 15 MB payload (the RSS target is 60 MiB at 10,000
// Services).
func makePlan(in renderInput) *plan {
	p := &plan{r: newRenderer(in), full: in.Last == nil, jumps: in.MissingJumps}
	last := &syncState{}
	if !p.full {
		last = in.Last
	}
	state := &syncState{services: make(map[string]serviceState, len(in.Services))}
	var (
		items   = make([]chainItem, 0, 2*len(in.Services))
		scratch bytes.Buffer // one Service's chains, then its jumps: spelled only to be hashed
		jumps   maphash.Hash // of every VIPA-SERVICES rule
		seenVIP = make(map[netip.Addr]bool, len(in.Services))
	)
	jumps.SetSeed(hashSeed)
	for _, s := range sortedServices(in.Services) {
		key := s.Namespace + "/" + s.Name
		if _, dup := state.services[key]; dup {
			continue
		}
		scratch.Reset()
		first := len(items)
		var chains []string
		for i, port := range s.Ports {
			chain := svcChainName(s.Namespace, s.Name, port, in.Family)
			if p.r.portChain(&scratch, s, port, chain) == 0 {
				continue // no usable endpoint: no jump, so the filter rejects the port
			}
			chains = append(chains, chain)
			items = append(items, chainItem{name: chain, svc: s, port: i})
		}
		st := serviceState{hash: maphash.Bytes(hashSeed, scratch.Bytes()), chains: chains}
		state.services[key] = st
		prev, ok := last.services[key]
		changed := p.full || !ok || prev.hash != st.hash
		scratch.Reset()
		for i := first; i < len(items); i++ {
			items[i].write = changed
			p.r.serviceJumps(&scratch, s, s.Ports[items[i].port], items[i].name)
		}
		_, _ = jumps.Write(scratch.Bytes()) // a maphash.Hash never fails
		for _, vip := range s.VIPs {
			if vip = vip.Unmap(); p.r.family.matches(vip) && !seenVIP[vip] { // Services may share a VIP
				if len(seenVIP) == 0 {
					p.nfilter += p.r.filterTop(&p.filter)
				}
				seenVIP[vip] = true
				p.nfilter += p.r.filterVIP(&p.filter, vip)
			}
		}
	}
	state.servicesHash = jumps.Sum64()
	state.filterHash = maphash.Bytes(hashSeed, p.filter.Bytes())
	p.state = state
	p.writeServices = p.full || state.servicesHash != last.servicesHash
	p.writeFilter = p.full || state.filterHash != last.filterHash

	p.order(items, staleChains(last, state, items, in.Existing))
	return p
}

// staleChains are the chains to delete, by table: those of Services that
// changed or went away, and (full sync) any VIPA- chain found in iptables that
// this rendering does not produce.
func staleChains(last, state *syncState, items []chainItem, existing map[string][]string) map[string]map[string]bool {
	stale := map[string]map[string]bool{"filter": {}, "nat": {}}
	for key, prev := range last.services {
		cur, ok := state.services[key]
		if ok && cur.hash == prev.hash {
			continue // same rules, same chains
		}
		for _, c := range prev.chains {
			if !ok || !slices.Contains(cur.chains, c) {
				stale["nat"][c] = true
			}
		}
	}
	if existing != nil {
		desired := make(map[string]bool, len(items))
		for _, it := range items {
			desired[it.name] = true
		}
		for table, chains := range existing {
			for _, c := range chains {
				if stale[table] != nil && !desired[c] && !isTop(c) {
					stale[table][c] = true
				}
			}
		}
	}

	return stale
}

// order lists what the plan writes: the chains that changed (all of them when
// the jumps changed), the stale Service chains to flush and delete, the other
// stale chains apart.
func (p *plan) order(items []chainItem, stale map[string]map[string]bool) {
	for _, it := range items {
		if it.write || p.writeServices {
			p.emit = append(p.emit, it)
		}
	}
	p.staleOther = map[string][]string{}
	for table, chains := range stale {
		for c := range chains {
			if table == "nat" && strings.HasPrefix(c, svcChainStem) {
				p.emit = append(p.emit, chainItem{name: c, stale: true})
			} else {
				p.staleOther[table] = append(p.staleOther[table], c)
			}
		}
		slices.Sort(p.staleOther[table])
	}
	// Descending name order: see write.
	slices.SortFunc(p.emit, func(a, b chainItem) int { return strings.Compare(b.name, a.name) })
}

func isTop(chain string) bool {
	switch chain {
	case chainServices, chainPost, chainMasq, chainFilter, chainCanary:
		return true
	}
	return false
}

// writes reports which tables the payload touches; none means there is nothing to do.
//
// The fixed chains (canaries, masquerade) never change, so only a full Sync writes them: on
// the nft backend a commit that adds any rule makes the kernel revalidate every chain
// reachable from PREROUTING and OUTPUT (~80 ms each at 10,000 Services), and a partial Sync
// with nothing to change should not write at all.
func (p *plan) writes() (filter, nat bool) {
	filter = p.full || p.writeFilter || len(p.staleOther["filter"]) > 0
	nat = p.full || p.writeServices || len(p.emit) > 0 || len(p.staleOther["nat"]) > 0
	return filter || len(p.jumps) > 0, nat || len(p.jumps) > 0
}

// write spells the iptables-restore --noflush payload and counts its rules and chains.
//
// The order of the nat table is chosen for iptables-nft 1.8.x, which keeps the chains a
// payload mentions in a sorted linked list and walks it for every line: a payload naming
// 20,000 chains in arbitrary order spends ~45 s in strcmp. Taking the per-Service-port chains
// in descending name order, each with its rules and the VIPA-SERVICES jumps to it, keeps every
// walk at the list head (docs/performance.md has the restore times). Legacy iptables does not care.
func (p *plan) write(out sink) (rules, chains int) {
	w := &tableWriter{out: out}
	filter, nat := p.writes()
	if filter {
		w.begin("filter", p.staleOther["filter"])
		if p.writeFilter {
			w.declare(chainFilter)
		}
		if p.full {
			w.declare(chainCanary)
			w.rule(chainCanary + " -j RETURN")
		}
		if p.writeFilter {
			out.Write(p.filter.Bytes())
			w.rules += p.nfilter
		}
		w.insertJumps("filter", p.jumps)
		w.end()
	}
	if nat {
		w.begin("nat", p.staleOther["nat"])
		if p.writeServices {
			w.declare(chainServices) // flushing it first frees every Service chain to be deleted
		}
		if p.full {
			for _, c := range []string{chainPost, chainMasq, chainCanary} {
				w.declare(c)
			}
			w.rule(chainCanary + " -j RETURN")
			w.rules += p.r.natTop(out)
		}
		for _, it := range p.emit {
			switch {
			case it.stale:
				w.declare(it.name)
				out.WriteString("-X " + it.name + "\n")
			default:
				port := it.svc.Ports[it.port]
				if it.write {
					w.declare(it.name)
					w.rules += p.r.portChain(out, it.svc, port, it.name)
				}
				if p.writeServices {
					w.rules += p.r.serviceJumps(out, it.svc, port, it.name)
				}
			}
		}
		w.insertJumps("nat", p.jumps)
		w.end()
	}
	return w.rules, w.chains
}

// rendered is a payload as text, for tests.
type rendered struct {
	Payload       string
	Rules, Chains int
	State         *syncState
}

// render plans and writes into memory: the pure core the tests exercise.
func render(in renderInput) rendered {
	p := makePlan(in)
	var b bytes.Buffer
	rules, chains := p.write(&b)
	return rendered{Payload: b.String(), Rules: rules, Chains: chains, State: p.state}
}

// tableWriter writes table sections and counts what it declares.
type tableWriter struct {
	out           sink
	rules, chains int
	deleteLast    []string
}

// begin opens a table and flushes toDelete, whose chains are deleted by end: a chain can be
// deleted only once nothing jumps to it, and these may jump to one another.
func (w *tableWriter) begin(table string, toDelete []string) {
	w.out.WriteString("*" + table + "\n")
	w.deleteLast = toDelete
	for _, c := range toDelete {
		w.declare(c)
	}
}

// declare flushes the chain, creating it if needed.
func (w *tableWriter) declare(chain string) {
	w.out.WriteString(":" + chain + " - [0:0]\n")
	w.chains++
}

// insertJumps writes the jumps of this table at position 1, after our chains exist.
func (w *tableWriter) insertJumps(table string, jumps []jump) {
	for _, j := range jumps {
		if j.table == table {
			w.out.WriteString("-I " + j.from + " 1 " + jumpSpec + " -j " + j.to + "\n")
			w.rules++
		}
	}
}

// rule writes "-A spec".
func (w *tableWriter) rule(spec string) {
	w.out.WriteString("-A " + spec + "\n")
	w.rules++
}

func (w *tableWriter) end() {
	for _, c := range w.deleteLast {
		w.out.WriteString("-X " + c + "\n")
	}
	w.out.WriteString("COMMIT\n")
}

// deletePayload flushes and deletes the given chains, per table; nil when there are none.
// Service port chains go one by one in descending name order (see plan.write) after the
// others are flushed, since only those jump to them.
func deletePayload(chains map[string][]string) []byte {
	var out bytes.Buffer
	for _, table := range tables {
		if len(chains[table]) == 0 {
			continue
		}
		var svc, others []string
		for _, c := range chains[table] {
			if strings.HasPrefix(c, svcChainStem) {
				svc = append(svc, c)
			} else {
				others = append(others, c)
			}
		}
		w := &tableWriter{out: &out}
		w.begin(table, others)
		slices.Sort(svc)
		slices.Reverse(svc)
		for _, c := range svc {
			w.declare(c)
			out.WriteString("-X " + c + "\n")
		}
		w.end()
	}
	if out.Len() == 0 {
		return nil
	}
	return out.Bytes()
}
