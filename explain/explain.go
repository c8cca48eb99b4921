package explain

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"

	"k8s.io/apimachinery/pkg/types"

	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
)

// ErrNotFound is returned when the subject does not exist.
var ErrNotFound = errors.New("not found")

// Service explains the Service key: its allocation, then each of its addresses.
func Service(o *Observed, key types.NamespacedName) (Report, error) {
	svc := o.service(key)
	if svc == nil {
		return Report{}, fmt.Errorf("Service %s: %w", key, ErrNotFound)
	}
	r := Report{Subject: "Service " + key.String()}
	a := o.allocation(svc)
	r.Allocation = &a
	l := o.liveness()
	for _, addr := range ingress.Addrs(svc) {
		r.VIPs = append(r.VIPs, o.vip(addr, l))
	}
	r.Problems = o.problems()
	return r, nil
}

// IP explains one address: the allocation of the Service that holds it
// first, then the address.
func IP(o *Observed, addr netip.Addr) (Report, error) {
	ip := o.ledger(addr)
	if ip == nil {
		return Report{}, fmt.Errorf("IP %s: no IP object holds it: %w", addr, ErrNotFound)
	}
	r := Report{Subject: "IP " + addr.String()}
	if holders := o.holders(ip); len(holders) > 0 {
		a := o.allocation(holders[0])
		r.Allocation = &a
	}
	r.VIPs = []VIP{o.vip(addr, o.liveness())}
	r.Problems = o.problems()
	return r, nil
}

// Group explains every address of IPGroup name that a Service holds.
func Group(o *Observed, name string) (Report, error) {
	if o.group(name) == nil {
		return Report{}, fmt.Errorf("IPGroup %s: %w", name, ErrNotFound)
	}
	return o.each("IPGroup "+name, o.ledgerAddrs(name)), nil
}

// Node explains every address a Service holds, as node sees it: which it
// carries, and for the others why not.
func Node(o *Observed, name string) (Report, error) {
	if o.node(name) == nil {
		return Report{}, fmt.Errorf("Node %s: %w", name, ErrNotFound)
	}
	return o.each("Node "+name, o.ledgerAddrs("")), nil
}

// each explains addrs under subject.
func (o *Observed) each(subject string, addrs []netip.Addr) Report {
	r := Report{Subject: subject}
	l := o.liveness()
	for _, addr := range addrs {
		r.VIPs = append(r.VIPs, o.vip(addr, l))
	}
	r.Problems = o.problems()
	return r
}

// problems are the agents that did not answer, and the agents whose view of
// who is alive differs from the one the election is run on (a partition, or
// gossip still settling: they elect other owners).
func (o *Observed) problems() []string {
	var out []string
	for _, n := range sortedKeys(o.Unreachable) {
		out = append(out, fmt.Sprintf("%s's agent did not answer: %s", n, o.Unreachable[n]))
	}
	from := o.liveness().from
	if from == "" {
		if len(o.agentNodes()) > 0 {
			out = append(out, "no agent answered: the election below takes every node with an agent as alive")
		}
		return out
	}
	want := sortedKeys(o.Facts[from].Alive)
	for _, n := range sortedKeys(o.Facts) {
		if got := sortedKeys(o.Facts[n].Alive); !slices.Equal(got, want) {
			out = append(out, fmt.Sprintf("%s's agent sees %s alive, %s's sees %s: the election below is %s's",
				n, orNone(got), from, orNone(want), from))
		}
	}
	return out
}

// WhatIfDrain runs the election of every address in r again without node
// (cordoned, excluded or its agent stopped: none of them carries addresses)
// and lists the addresses whose owner or advertisers would change.
func WhatIfDrain(o *Observed, r Report, node string) Drain {
	d := Drain{Node: node, Moves: []Move{}}
	l := o.liveness()
	l.alive = slices.DeleteFunc(slices.Clone(l.alive), func(n election.Node) bool { return n.Name == node })
	for _, v := range r.VIPs {
		addr, err := netip.ParseAddr(v.Address)
		if err != nil {
			continue
		}
		after := o.vip(addr, l).Election
		from, to := carriers(v.Election), carriers(after)
		if !slices.Equal(from, to) {
			d.Moves = append(d.Moves, Move{Address: v.Address, From: from, To: to})
		}
	}
	return d
}

// carriers are the nodes an election gives the address to.
func carriers(e Election) []string {
	if e.Owner != "" {
		return []string{e.Owner}
	}
	return slices.Clone(e.Advertisers)
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
