package announce

import (
	"net/netip"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
)

// The failover history of the BGP VIPs: every change of a VIP's advertisers
// (status.announcedBy) is one entry, added in the ledger write that makes
// the change, by the agent that writes it. A node joining records itself
// (From empty); a node leaving is recorded by itself when it drops itself,
// or by the VIP's recorder when that prunes it (To empty).

// routeChange is the last change of this node's route for a VIP: noticed is
// when the pass that made it noticed what changed, done when the speaker's
// Advertise call of that pass returned; advertised says whether the route
// is advertised after it (false: withdrawn, or marked for graceful shutdown).
type routeChange struct {
	noticed, done time.Time
	advertised    bool
}

// routeFlips are the VIPs whose route goes, from prev to want (the routes two
// passes decide, unmarked), from advertised to not or back: each with
// whether it is advertised now.
func routeFlips(prev, want []bgp.Route) map[netip.Addr]bool {
	before, after := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	for _, r := range prev {
		before[r.Prefix.Addr()] = true
	}
	for _, r := range want {
		after[r.Prefix.Addr()] = true
	}
	out := map[netip.Addr]bool{}
	for vip := range before {
		if !after[vip] {
			out[vip] = false
		}
	}
	for vip := range after {
		if !before[vip] {
			out[vip] = true
		}
	}
	return out
}

// advertiserEntries are the history entries self adds in the write that
// turns cur, a BGP VIP's announcedBy, into next: a join (From empty) when
// self lists itself, a leave (To empty) for each node dropped, self or,
// as the VIP's recorder, another. at is when the pass that decided the
// write noticed what changed. A join's cause is ElectionChange (self is
// alive and eligible); a leave's is the node's state among alive
// (nodeCause). Self's own entry, when its route last changed the same way
// (route, ok), is dated from that change and has its gap: from noticing to
// the Advertise call returning. Another node's leave has no gap: its routes
// go when its sessions do, which only the routers see.
func advertiserEntries(self string, cur, next []string, alive []election.Node, at time.Time, route routeChange, ok bool) []paasv1.Failover {
	var out []paasv1.Failover
	entry := func(from, to string, cause paasv1.FailoverCause) paasv1.Failover {
		e := paasv1.Failover{At: metav1.NewTime(at.UTC().Truncate(time.Second)), From: from, To: to, Cause: cause}
		if ok && (from == self || to == self) && route.advertised == (to == self) {
			e.At = metav1.NewTime(route.noticed.UTC().Truncate(time.Second))
			gap := max(route.done.Sub(route.noticed), 0).Milliseconds()
			e.GapMilliseconds = &gap
		}
		return e
	}
	for _, n := range cur {
		if !slices.Contains(next, n) {
			out = append(out, entry(n, "", nodeCause(n, alive)))
		}
	}
	if slices.Contains(next, self) && !slices.Contains(cur, self) {
		out = append(out, entry("", self, paasv1.FailoverElectionChange))
	}
	return out
}
