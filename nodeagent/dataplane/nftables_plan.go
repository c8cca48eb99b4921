package dataplane

import (
	"slices"
)

// nftState is what the nftables plane remembers after a successful Sync, to write only what
// changed next time. At 10,000 Services it holds ~120,000 elements in ~4 MB.
type nftState struct {
	services map[string]nftService // by namespace/name
	ports    map[string]string     // Service port key -> namespace/name of the Service serving it
	vipRefs  map[string]int        // VIP -> Services using it (Services may share a VIP on distinct ports)
	maps     map[int]bool          // endpoint counts whose map and DNAT rule exist
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
	// fullCount is how many elements a full Sync writes.
	fullCount int
	state     *nftState
}

// planNFTables compares services with last (nil: a full Sync) and lists the element changes.
// It updates last in place and returns it as the new state: the plane forgets last until the
// transaction succeeds.
func planNFTables(fam Family, services []Service, last *nftState) *nftPlan {
	return planNFTablesReusing(fam, services, last, nil, nil)
}

// planNFTablesReusing is planNFTables, but a full plan (last nil) takes the records of
// unchanged Services from reuse instead of allocating them again: a full Sync at 10,000
// Services would otherwise leave ~5 MB of garbage.
//
// changed (partial plans only; nil: every Service) names the Services that may differ from
// last: the others keep their records without being rendered again, which is most of a
// partial plan's cost. Until a Service port is released in the plan: from then on every
// Service is rendered, since one that lost that port to another may now take it, exactly as
// if all were rendered.
func planNFTablesReusing(fam Family, services []Service, last, reuse *nftState, changed map[string]bool) *nftPlan {
	p := &nftPlan{full: last == nil}
	if p.full {
		last = &nftState{services: map[string]nftService{}, ports: map[string]string{}, vipRefs: map[string]int{}, maps: map[int]bool{}}
	}
	st := &nftState{services: make(map[string]nftService, len(services)), ports: last.ports, vipRefs: last.vipRefs, maps: last.maps}
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
	er := newElemRenderer(fam)
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
		})
		return p
	}
	for _, e := range p.add {
		if k := e.set.endpointCount(); k > 0 && !st.maps[k] {
			st.maps[k] = true
			p.newMaps = append(p.newMaps, k)
		}
	}
	slices.Sort(p.newMaps)
	return p
}

// releasePorts forgets the Service port keys owner served in prev and no longer does in cur,
// and says whether there were any.
func (st *nftState) releasePorts(owner string, prev, cur nftService) (released bool) {
	kept := map[string]bool{}
	eachElem(cur.records, func(e nftElem) {
		if k := e.portKey(); k != "" {
			kept[k] = true
		}
	})
	eachElem(prev.records, func(e nftElem) {
		if k := e.portKey(); k != "" && !kept[k] && st.ports[k] == owner {
			delete(st.ports, k)
			released = true
		}
	})
	return released
}

// change records what turns a Service's elements old into new: elements in only one of them,
// or with other data, are deleted or added. VIPs are counted, since Services may share one.
func (p *nftPlan) change(old, new nftService) {
	if old.records == "" { // a new Service, or any Service of a full Sync: no need to compare
		eachElem(new.records, p.put)
		return
	}
	type id struct {
		set      setID
		key, end string
	}
	had := map[id]string{}
	eachElem(old.records, func(e nftElem) { had[id{e.set, e.key, e.end}] = e.val })
	kept := map[id]bool{}
	eachElem(new.records, func(e nftElem) {
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
