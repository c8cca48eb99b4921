//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestBGPHistory: in the BGP lab, every change of a VIP's advertisers is in
// its IP object's history: each node joining as it starts advertising, a
// node whose agent is killed leaving (OwnerDead, recorded by a node still
// alive), a cordoned node leaving (Excluded) and, uncordoned, joining again
// with the gap from noticing to its route handed to its BGP speaker.
func TestBGPHistory(t *testing.T) {
	d := setupBGP(t)
	ctx := context.Background()
	peer := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"},
		Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513}}
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp-vips"}, Spec: paasv1.IPGroupSpec{
		Segment: "203.0.113.128/25", Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}}
	for _, o := range []client.Object{peer, group} {
		if err := d.env.Admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	all := []string{"node1", "node2", "node3"}
	for _, n := range all {
		d.startAgent(t, n)
	}
	vip := d.vipOf(t, d.bgpService(t, "web", false))
	d.waitNextHops(t, vip, all...)
	h := d.waitAdvertisers(t, vip, all, 3)
	var joined []string
	for _, e := range h {
		if e.From == "" && e.Cause == paasv1.FailoverElectionChange {
			joined = append(joined, e.To)
		}
	}
	if slices.Sort(joined); !slices.Equal(joined, all) {
		t.Fatalf("history of a VIP every node started advertising: %+v, want the joins of %v, in any order", h, all)
	}

	// SIGKILL: the agent never withdraws; another node prunes it.
	killed := time.Now()
	_ = d.agents["node3"].Process.Kill()
	_ = d.agents["node3"].Wait()
	delete(d.agents, "node3")
	h = d.waitAdvertisers(t, vip, all[:2], 4)
	left := h[3]
	t.Logf("node3's agent killed: recorded %q -> %q, %s, at %s, gap %v, after %s", left.From, left.To, left.Cause,
		left.At.Format(time.RFC3339), ptrValue(left.GapMilliseconds), time.Since(killed).Round(10*time.Millisecond))
	if left.From != "node3" || left.To != "" || left.Cause != paasv1.FailoverOwnerDead || left.GapMilliseconds != nil ||
		left.At.Time.Before(killed.Truncate(time.Second)) {
		t.Fatalf("entry %+v: want node3 leaving, OwnerDead, no gap, noticed after the kill at %s", left, killed.Format(time.RFC3339Nano))
	}
	d.startAgent(t, "node3")
	h = d.waitAdvertisers(t, vip, all, 5)
	checkJoin(t, h[4], "node3")

	cordoned := time.Now()
	d.cordon(t, "node2", true)
	h = d.waitAdvertisers(t, vip, []string{"node1", "node3"}, 6)
	out := h[5]
	t.Logf("node2 cordoned: recorded %q -> %q, %s, gap %v (a gap: written by node2 itself, none: pruned by another)",
		out.From, out.To, out.Cause, ptrValue(out.GapMilliseconds))
	if out.From != "node2" || out.To != "" || out.Cause != paasv1.FailoverExcluded || out.At.Time.Before(cordoned.Truncate(time.Second)) {
		t.Fatalf("entry %+v: want node2 leaving, Excluded, noticed after the cordon", out)
	}
	d.cordon(t, "node2", false)
	h = d.waitAdvertisers(t, vip, all, 7)
	checkJoin(t, h[6], "node2")
}

// checkJoin fails t unless e is node's join, with its gap within the bound.
func checkJoin(t testing.TB, e paasv1.Failover, node string) {
	t.Helper()
	t.Logf("%s back: recorded %q -> %q, %s, gap %v ms", node, e.From, e.To, e.Cause, ptrValue(e.GapMilliseconds))
	if e.From != "" || e.To != node || e.Cause != paasv1.FailoverElectionChange || e.GapMilliseconds == nil ||
		time.Duration(*e.GapMilliseconds)*time.Millisecond > failoverGapBound {
		t.Fatalf("entry %+v: want %s joining, ElectionChange, with a gap within %s", e, node, failoverGapBound)
	}
}

// waitAdvertisers waits until vip's IP object names nodes as advertising it
// and its history holds n entries, and returns the history. More entries
// than n (a change the test did not make) fail t.
func (d *bgpLab) waitAdvertisers(t testing.TB, vip string, nodes []string, n int) []paasv1.Failover {
	t.Helper()
	var ip paasv1.IP
	testenv.Eventually(t, settle, fmt.Sprintf("%s advertised by %v after %d changes", vip, nodes, n), func() error {
		if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: paasv1.IPObjectName(netip.MustParseAddr(vip))}, &ip); err != nil {
			return err
		}
		if !slices.Equal(ip.Status.AnnouncedBy, nodes) || len(ip.Status.History) < n {
			return fmt.Errorf("advertised by %v, history %+v", ip.Status.AnnouncedBy, ip.Status.History)
		}
		return nil
	})
	if len(ip.Status.History) != n {
		t.Fatalf("history %+v: want %d entries", ip.Status.History, n)
	}
	return ip.Status.History
}
