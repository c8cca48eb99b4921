//go:build root && envtest

package e2e

import (
	"context"
	"net/netip"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/equality"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// failoverGapBound is the bound of the part of a failover the new owner
// measures (status.history's gapMilliseconds): the alert
// VIPAllocatorFailoverSlow fires above it.
const failoverGapBound = time.Second

// TestFailoverHistory kills the agent of a VIP's owner in the L2 lab: the
// node that takes the VIP over records, on the VIP's IP object, the move from
// the dead owner to itself, cause OwnerDead, with a gap within the bound; the
// killed agent, started again, takes the VIP back and records that too
// (ElectionChange), and loses it again when its node is cordoned (Excluded).
func TestFailoverHistory(t *testing.T) {
	d, _, vip, from := announcedLab(t)
	if h := d.history(t, vip); len(h) != 0 {
		t.Fatalf("history of a VIP announced once: %+v, want none", h)
	}

	killed := time.Now()
	_ = d.agents[from].Process.Kill()
	_ = d.agents[from].Wait()
	delete(d.agents, from)
	took := d.untilAnnouncedElsewhere(t, vip, from, killed)
	to := d.owner(t, vip, from)
	h := d.history(t, vip)
	if len(h) != 1 {
		t.Fatalf("history after %s's agent was killed: %+v, want one entry", from, h)
	}
	e := h[0]
	t.Logf("killed %s's agent: %s taken over by %s after %s; recorded %s -> %s, %s, at %s, gap %v ms",
		from, vip, to, took, e.From, e.To, e.Cause, e.At.Format(time.RFC3339), ptrValue(e.GapMilliseconds))
	if e.From != from || e.To != to || e.Cause != paasv1.FailoverOwnerDead {
		t.Fatalf("entry %s -> %s, %s: want %s -> %s, %s", e.From, e.To, e.Cause, from, to, paasv1.FailoverOwnerDead)
	}
	if e.GapMilliseconds == nil || time.Duration(*e.GapMilliseconds)*time.Millisecond > failoverGapBound {
		t.Fatalf("gap %v ms, want one within %s", ptrValue(e.GapMilliseconds), failoverGapBound)
	}
	// Noticed after the kill (to the second, as the API keeps it), before
	// the ledger named the new owner.
	if at := e.At.Time; at.Before(killed.Truncate(time.Second)) || at.After(killed.Add(took)) {
		t.Fatalf("entry at %s: want between the kill (%s) and the takeover (%s later)", at, killed.Format(time.RFC3339Nano), took)
	}

	// Back: rendezvous hashing gives it the VIP again, from a live owner.
	d.startAgent(t, from, d.agentArgs...)
	d.waitAnnouncer(t, vip, from)
	h = d.history(t, vip)
	if len(h) != 2 || !equality.Semantic.DeepEqual(h[0], e) {
		t.Fatalf("history after %s came back: %+v, want the first entry and one more", from, h)
	}
	back := h[1]
	t.Logf("%s back: recorded %s -> %s, %s, gap %v ms", from, back.From, back.To, back.Cause, ptrValue(back.GapMilliseconds))
	if back.From != to || back.To != from || back.Cause != paasv1.FailoverElectionChange || back.GapMilliseconds == nil {
		t.Fatalf("entry %+v: want %s -> %s, %s, with a gap", back, to, from, paasv1.FailoverElectionChange)
	}

	// Cordoned (--on-cordon=handover, the default): a planned move, Excluded.
	d.cordon(t, from, true)
	next := d.owner(t, vip, from)
	h = d.history(t, vip)
	if len(h) != 3 {
		t.Fatalf("history after %s was cordoned: %+v, want three entries", from, h)
	}
	moved := h[2]
	t.Logf("%s cordoned: recorded %s -> %s, %s, gap %v ms", from, moved.From, moved.To, moved.Cause, ptrValue(moved.GapMilliseconds))
	if moved.From != from || moved.To != next || moved.Cause != paasv1.FailoverExcluded || moved.GapMilliseconds == nil ||
		time.Duration(*moved.GapMilliseconds)*time.Millisecond > failoverGapBound {
		t.Fatalf("entry %+v: want %s -> %s, %s, with a gap within %s", moved, from, next, paasv1.FailoverExcluded, failoverGapBound)
	}
}

// history is the status.history of vip's IP object.
func (d *l2Lab) history(t testing.TB, vip string) []paasv1.Failover {
	t.Helper()
	var ip paasv1.IP
	if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: paasv1.IPObjectName(netip.MustParseAddr(vip))}, &ip); err != nil {
		t.Fatal(err)
	}
	return ip.Status.History
}

func ptrValue[T any](p *T) any {
	if p == nil {
		return "none"
	}
	return *p
}
