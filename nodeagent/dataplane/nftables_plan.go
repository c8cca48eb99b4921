package dataplane

import (
	"slices"
	"strings"
)

// nftState is what the nftables plane remembers after a successful Sync, to write only what
// changed next time. At 10,000 Services it holds ~120,000 elements in ~4 MB.
type nftState struct {
	services map[string]nftService // by namespace/name
	ports    map[string]string     // Service port key -> namespace/name of the Service serving it
	vipRefs  map[string]int        // VIP -> Services using it (Services may share a VIP on distinct ports)
	maps     map[int]bool          // endpoint counts whose map and DNAT rule exist
	affinity map[uint32]bool       // session affinities (seconds) whose set and rules exist
}

// nftService is what one Service contributed: its elements as records (see appendElem).
type nftService struct {
	records string
}

// nftPlan is one Sync's transaction, decided before anything is written.
type nftPlan struct {
	full bool
	// del and add are the element changes of a partial Sync, del first (a changed map element
	// is deleted and added again). A full Sync writes every element of state instead
	// (nftState.each): listing them here too would cost ~7 MB at 10,000 Services.
	del, add []nftElem
	newMaps  []int // endpoint counts whose map and rule a partial Sync creates first
	// newAffinity are the session affinities whose set and rules a partial Sync creates first.
	newAffinity []uint32
	// forget are the clients map's elements a partial Sync deletes once written, by Service
	// port key (see forgetClients).
	forget map[string]forgetting
	// fullCount is how many elements a full Sync writes.
	fullCount int
	state     *nftState
}

// planNFTablesReusing compares services with last (nil: a full Sync) and lists the element
// changes. It updates last in place and returns it as the new state: the plane forgets last
// until the transaction succeeds. A full plan takes the records of unchanged Services from
// reuse instead of allocating them again: a full Sync at 10,000 Services would otherwise
// leave ~5 MB of garbage.
//
// changed (partial plans only; nil: every Service) names the Services that may differ from
// last: the others keep their records without being rendered again, which is most of a
// partial plan's cost. Until a Service port is released in the plan: from then on every
// Service is rendered, since one that lost that port to another may now take it, exactly as
// if all were rendered.
func planNFTablesReusing(fam Family, services []Service, last, reuse *nftState, changed map[string]bool, steer *steerView) *nftPlan {
	p := &nftPlan{full: last == nil}
	if p.full {
		last = &nftState{services: map[string]nftService{}, ports: map[string]string{}, vipRefs: map[string]int{}, maps: map[int]bool{}, affinity: map[uint32]bool{}}
	}
	st := &nftState{services: make(map[string]nftService, len(services)), ports: last.ports, vipRefs: last.vipRefs, maps: last.maps, affinity: last.affinity}
	p.state = st
	sorted := sortedServices(services)
	wanted := make(map[string]bool, len(sorted))
	for _, s := range sorted {
		wanted[s.Namespace+"/"+s.Name] = true
	}
	// Services gone first, so that their ports are free for the others.
	renderAll := changed == nil || p.full
	for key, prev := range last.services {
		if !wanted[key] {
			p.retract(prev)
			if st.releasePorts(key, prev, nftService{}) {
				renderAll = true
			}
		}
	}
	er := newElemRenderer(fam, steer)
	var scratch []byte
	for _, s := range sorted {
		key := s.Namespace + "/" + s.Name
		if _, dup := st.services[key]; dup {
			continue
		}
		prev, had := last.services[key]
		if had && !renderAll && !changed[key] {
			st.services[key] = prev
			continue
		}
		scratch = er.serviceElements(s, st.ports, key, scratch[:0])
		if prev.records != "" && string(scratch) == prev.records {
			st.services[key] = prev
			continue
		}
		var cur nftService
		if reuse != nil && reuse.services[key].records == string(scratch) {
			cur = reuse.services[key]
		} else {
			cur = nftService{records: string(scratch)}
		}
		if st.releasePorts(key, prev, cur) {
			renderAll = true
		}
		p.change(prev, cur)
		st.services[key] = cur
	}
	if p.full {
		st.each(func(e nftElem) {
			if k := e.set.endpointCount(); k > 0 {
				st.maps[k] = true // the full transaction declares every map in st.maps
			}
			if secs := e.set.affinitySeconds(); secs > 0 {
				st.affinity[secs] = true
			}
		})
		return p
	}
	p.declareNewMaps()
	return p
}

// declareNewMaps lists the endpoint maps and affinity sets a partial plan's additions need and
// the state lacks.
func (p *nftPlan) declareNewMaps() {
	for _, e := range p.add {
		if k := e.set.endpointCount(); k > 0 && !p.state.maps[k] {
			p.state.maps[k] = true
			p.newMaps = append(p.newMaps, k)
		}
		if secs := e.set.affinitySeconds(); secs > 0 && !p.state.affinity[secs] {
			p.state.affinity[secs] = true
			p.newAffinity = append(p.newAffinity, secs)
		}
	}
	slices.Sort(p.newMaps)
	slices.Sort(p.newAffinity)
}

// releasePorts forgets the Service port keys owner served in prev and no longer does in cur,
// and says whether there were any.
func (st *nftState) releasePorts(owner string, prev, cur nftService) (released bool) {
	kept := portKeys(cur.records)
	for k := range portKeys(prev.records) {
		if !kept[k] && st.ports[k] == owner {
			delete(st.ports, k)
			released = true
		}
	}
	return released
}

// change records what turns a Service's elements old into new: elements in only one of them,
// or with other data, are deleted or added. VIPs are counted, since Services may share one.
func (p *nftPlan) change(old, next nftService) {
	if !p.full {
		p.forgetClients(old.records, next.records)
	}
	if old.records == "" { // a next Service, or any Service of a full Sync: no need to compare
		eachElem(next.records, p.put)
		return
	}
	type id struct {
		set      setID
		key, end string
	}
	had := map[id]string{}
	eachElem(old.records, func(e nftElem) { had[id{e.set, e.key, e.end}] = e.val })
	kept := map[id]bool{}
	eachElem(next.records, func(e nftElem) {
		i := id{e.set, e.key, e.end}
		if v, ok := had[i]; ok && v == e.val {
			kept[i] = true
			return
		}
		p.put(e)
	})
	eachElem(old.records, func(e nftElem) {
		if !kept[id{e.set, e.key, e.end}] {
			p.drop(e)
		}
	})
}

// retract deletes every element of a Service that is gone.
func (p *nftPlan) retract(svc nftService) {
	p.forgetClients(svc.records, "")
	eachElem(svc.records, p.drop)
}

func (p *nftPlan) put(e nftElem) {
	if e.set == setVIPs {
		p.state.vipRefs[e.key]++
		if p.state.vipRefs[e.key] > 1 {
			return
		}
	}
	if p.full {
		p.fullCount++
		return
	}
	p.add = append(p.add, e)
}

// each calls f for every element the state holds, each VIP once.
func (st *nftState) each(f func(nftElem)) {
	for vip := range st.vipRefs {
		f(nftElem{set: setVIPs, key: vip})
	}
	for _, svc := range st.services {
		eachElem(svc.records, func(e nftElem) {
			if e.set != setVIPs {
				f(e)
			}
		})
	}
}

func (p *nftPlan) drop(e nftElem) {
	if e.set == setVIPs {
		p.state.vipRefs[e.key]--
		if p.state.vipRefs[e.key] > 0 {
			return
		}
		delete(p.state.vipRefs, e.key)
	}
	p.del = append(p.del, e)
}

// planNFTablesChanged is the partial plan of a Sync told which Services changed (see
// ChangeSyncer): it renders only those, and finds them with one pass over services, so a
// change costs the plan the work of the Services it touched. A Service named in changed and
// missing from services is gone. It returns nil, having changed nothing, when a Service port
// would be released: which Service takes a released port depends on the order of them all
// (planNFTablesReusing decides then).
func planNFTablesChanged(fam Family, services []Service, last *nftState, changed map[string]bool, steer *steerView) *nftPlan {
	if last == nil {
		return nil
	}
	type item struct {
		key       string
		svc       *Service
		prev, cur nftService
	}
	var items []item
	seen := make(map[string]bool, len(changed))
	var buf []byte
	for i := range services {
		s := &services[i]
		buf = append(append(append(buf[:0], s.Namespace...), '/'), s.Name...)
		if !changed[string(buf)] || seen[string(buf)] {
			continue // unchanged, or a duplicate: the first one counts, as when sorted
		}
		key := string(buf)
		seen[key] = true
		items = append(items, item{key: key, svc: s, prev: last.services[key]})
	}
	var gone []string
	for key := range changed {
		if prev, ok := last.services[key]; ok && !seen[key] {
			if len(portKeys(prev.records)) > 0 {
				return nil
			}
			gone = append(gone, key)
		}
	}
	slices.SortFunc(items, func(a, b item) int { return strings.Compare(a.key, b.key) })
	er := newElemRenderer(fam, steer)
	var scratch []byte
	for i := range items {
		it := &items[i]
		scratch = er.serviceElements(it.svc, last.ports, it.key, scratch[:0])
		if string(scratch) == it.prev.records {
			it.cur = it.prev
		} else {
			it.cur = nftService{records: string(scratch)}
		}
		kept := portKeys(it.cur.records)
		for k := range portKeys(it.prev.records) {
			if !kept[k] && last.ports[k] == it.key {
				// Released: undo this pass's claims (the ports rendering took that the
				// Services did not hold before) and leave it to the full order.
				for _, done := range items[:i+1] {
					had := portKeys(done.prev.records)
					for k := range portKeys(done.cur.records) {
						if !had[k] && last.ports[k] == done.key {
							delete(last.ports, k)
						}
					}
				}
				return nil
			}
		}
	}
	p := &nftPlan{state: last}
	for _, key := range gone {
		p.retract(last.services[key])
		delete(last.services, key)
	}
	for _, it := range items {
		if it.cur.records == it.prev.records && it.prev.records != "" {
			continue
		}
		p.change(it.prev, it.cur)
		last.services[it.key] = it.cur
	}
	p.declareNewMaps()
	return p
}

// portKeys are the Service port keys records serve.
func portKeys(records string) map[string]bool {
	out := map[string]bool{}
	eachElem(records, func(e nftElem) {
		if k := e.portKey(); k != "" {
			out[k] = true
		}
	})
	return out
}
