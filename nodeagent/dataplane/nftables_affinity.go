package dataplane

import (
	"errors"
	"fmt"

	"github.com/google/nftables"
	"golang.org/x/sys/unix"
)

// This file keeps the clients map of the nftables plane honest (see nftables_ruleset.go): the
// kernel adds its elements, the plane deletes those that name an endpoint gone or a port that
// lost its session affinity. It lists the map only then, and at a full Sync.

// forgetting is what to delete of one Service port's clients: all of them, or those sent to
// one of endpoints (keyed by endpoint map data: address . port).
type forgetting struct {
	all       bool
	endpoints map[string]bool
}

// stickyPorts reads records: the Service port keys with session affinity, and the endpoints
// (as endpoint map data) of every Service port key.
func stickyPorts(records string) (sticky map[string]bool, endpoints map[string]map[string]bool) {
	sticky, endpoints = map[string]bool{}, map[string]map[string]bool{}
	eachElem(records, func(e nftElem) {
		switch {
		case e.set.affinitySeconds() > 0:
			sticky[e.key] = true
		case e.set.endpointCount() > 0:
			k := e.key[:len(e.key)-4] // without the index
			if endpoints[k] == nil {
				endpoints[k] = map[string]bool{}
			}
			endpoints[k][e.val] = true
		}
	})
	return sticky, endpoints
}

// forgetClients notes what a partial Sync must delete from the clients map when a Service's
// records turn from old into new: every client of a port that loses its affinity, and the
// clients of a port with affinity sent to an endpoint it no longer has.
func (p *nftPlan) forgetClients(old, next string) {
	had, hadEPs := stickyPorts(old)
	if len(had) == 0 {
		return
	}
	has, hasEPs := stickyPorts(next)
	for k := range had {
		f := forgetting{all: !has[k]}
		for ep := range hadEPs[k] {
			if !f.all && !hasEPs[k][ep] {
				if f.endpoints == nil {
					f.endpoints = map[string]bool{}
				}
				f.endpoints[ep] = true
			}
		}
		if f.all || f.endpoints != nil {
			if p.forget == nil {
				p.forget = map[string]forgetting{}
			}
			p.forget[k] = f
		}
	}
}

// forgets reports whether a clients map element (key: Service port key . client; data:
// endpoint) is one the plan deletes.
func (p *nftPlan) forgets(addrLen int) func(key, val []byte) bool {
	return func(key, val []byte) bool {
		f, ok := p.forget[string(key[:len(key)-addrLen])]
		return ok && (f.all || f.endpoints[string(val)])
	}
}

// stale reports whether a clients map element names what st does not serve: a port without
// session affinity, or an endpoint the port does not have. A full Sync deletes those.
func (st *nftState) stale(addrLen int) func(key, val []byte) bool {
	valid := map[string]map[string]bool{}
	for _, svc := range st.services {
		sticky, endpoints := stickyPorts(svc.records)
		for k := range sticky {
			valid[k] = endpoints[k]
		}
	}
	return func(key, val []byte) bool {
		return !valid[string(key[:len(key)-addrLen])][string(val)]
	}
}

// deleteClients deletes the elements of the clients map that match. An element may expire
// between the listing and the deletion, which then fails as a whole: it lists again.
func (l *nftLayout) deleteClients(c *nftables.Conn, match func(key, val []byte) bool) error {
	clients := l.set(setClients)
	for attempt := 0; ; attempt++ {
		elems, err := c.GetSetElements(clients)
		if err != nil {
			return fmt.Errorf("list %s: %w", clients.Name, err)
		}
		b := &nftBatch{Conn: c}
		q := newElemQueue(b, map[setID]*nftables.Set{setClients: clients}, true)
		n := 0
		for _, e := range elems {
			if match(e.Key, e.Val) {
				q.put(nftElem{set: setClients, key: string(e.Key)})
				n++
			}
		}
		if n == 0 {
			return nil
		}
		q.flushAll()
		err = b.flush()
		if err == nil || !errors.Is(err, unix.ENOENT) || attempt == 2 {
			if err != nil {
				return fmt.Errorf("delete %d elements of %s: %w", n, clients.Name, err)
			}
			return nil
		}
	}
}
