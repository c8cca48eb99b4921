package announce

import (
	"net/netip"
	"slices"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// The failover history of the L2 VIPs (the IP objects' status.history): the
// agent that takes a VIP over records, in the claim that names it as the
// announcer, from which node, why, and how long it took from noticing the
// change to its first gratuitous announcement.

// DefaultHistoryLimit is how many ownership changes an IP object keeps.
const DefaultHistoryLimit = 10

// MaxHistoryLimit is the most the IP CRD allows (status.history MaxItems).
const MaxHistoryLimit = 32

// takeover is a VIP this node took over from another, remembered until its
// claim names this node on the ledger.
type takeover struct {
	from  string
	cause paasv1.FailoverCause
	// noticed is when this agent noticed the change (observation.noticed of
	// the pass that gave it the VIP).
	noticed time.Time
}

// takeovers are the takeovers of the VIPs in claim: the ones the last pass
// left (a claim not written yet), and the VIPs gained in this pass from
// another node (see takeoverOf). A VIP gained from no node (first announced)
// has none.
func takeovers(self string, claim, gained []netip.Addr, m carryover, o observation) map[netip.Addr]takeover {
	out := map[netip.Addr]takeover{}
	for _, vip := range claim {
		if t, ok := m.takeovers[vip]; ok {
			out[vip] = t
			continue
		}
		if _, found := slices.BinarySearchFunc(gained, vip, netip.Addr.Compare); !found {
			continue
		}
		if t, ok := takeoverOf(self, vip, m.elected, o); ok {
			out[vip] = t
		}
	}
	return out
}

// takeoverOf says from which node self takes vip over, and why, from what
// this pass knows: the owner the election gave vip in the last pass
// (elected), or, without one (this agent just started, was out of the
// majority, or no node was eligible), the other node the ledger names as
// announcer. ok is false when there is no such node: the VIP's first
// announcement is not a failover.
//
// The cause is the previous owner's state in this pass: not alive
// (OwnerDead), draining (PlannedMove), excluded or cordoned (Excluded), else
// ElectionChange, unless it came from the ledger alone and is not the owner
// the election picks with self left out (or the ledger names several other
// announcers): two nodes claimed the VIP (Conflict).
func takeoverOf(self string, vip netip.Addr, elected map[netip.Addr]string, o observation) (takeover, bool) {
	var others []string
	if ip := o.ledger[vip]; ip != nil {
		others = slices.DeleteFunc(slices.Clone(ip.Status.AnnouncedBy), func(n string) bool { return n == self })
	}
	prev, known := elected[vip]
	t := takeover{noticed: o.noticed}
	if t.noticed.IsZero() {
		t.noticed = o.now
	}
	fromElection := known && prev != "" && prev != self
	switch {
	case fromElection:
		t.from = prev
	case len(others) > 0:
		t.from = others[0]
	default:
		return takeover{}, false
	}
	t.cause = nodeCause(t.from, o.alive)
	if t.cause == paasv1.FailoverElectionChange && !fromElection &&
		(len(others) > 1 || (!known && previousOwner(self, vip, elected, o) != t.from)) {
		t.cause = paasv1.FailoverConflict
	}
	return t, true
}

// nodeCause is why a VIP leaves node, from its state among the alive nodes:
// not alive (OwnerDead), draining (PlannedMove), excluded or cordoned
// (Excluded), else alive and eligible (ElectionChange).
func nodeCause(node string, alive []election.Node) paasv1.FailoverCause {
	i := slices.IndexFunc(alive, func(n election.Node) bool { return n.Name == node })
	switch {
	case i < 0:
		return paasv1.FailoverOwnerDead
	case alive[i].Draining:
		return paasv1.FailoverPlannedMove
	case alive[i].Excluded || alive[i].Cordoned:
		return paasv1.FailoverExcluded
	default:
		return paasv1.FailoverElectionChange
	}
}

// failoverEntry is the history entry of takeover t of a VIP by node to,
// whose first gratuitous announcement went out at announced (zero: not seen
// sent; the entry has no gap then).
func failoverEntry(t takeover, to string, announced time.Time) paasv1.Failover {
	e := paasv1.Failover{At: metav1.NewTime(t.noticed.UTC().Truncate(time.Second)), From: t.from, To: to, Cause: t.cause}
	if !announced.IsZero() {
		gap := max(announced.Sub(t.noticed), 0).Milliseconds()
		e.GapMilliseconds = &gap
	}
	return e
}

// appendHistory is history with e appended, keeping the last limit entries
// (limit < 1: DefaultHistoryLimit; at most MaxHistoryLimit).
func appendHistory(history []paasv1.Failover, e paasv1.Failover, limit int) []paasv1.Failover {
	if limit < 1 {
		limit = DefaultHistoryLimit
	}
	limit = min(limit, MaxHistoryLimit)
	out := append(slices.Clone(history), e)
	if len(out) > limit {
		out = out[len(out)-limit:]
	}
	return out
}
