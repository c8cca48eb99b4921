//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// gshutDelay is the agents' --bgp-graceful-shutdown in TestBGPGracefulShutdown.
const gshutDelay = 3 * time.Second

// TestBGPGracefulShutdown: the BGP lab, three nodes in ECMP behind FRR over
// eBGP. A drained node first re-advertises its route with GRACEFUL_SHUTDOWN:
// the router leaves it out of its best paths and its kernel route while the
// session is still up, and only --bgp-graceful-shutdown later is it withdrawn;
// an agent stopping for a hand-over does the same before it closes its
// session; an iBGP router gets LOCAL_PREF 0 with the community. Requests through the router during a drain, with and without
// graceful shutdown, are counted in the same run.
func TestBGPGracefulShutdown(t *testing.T) {
	d := setupBGP(t)
	lab := t
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
	gshut := []string{"--bgp-graceful-shutdown", gshutDelay.String()}
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n, gshut...)
	}
	web := d.bgpService(t, "web", false)
	vip := d.vipOf(t, web)
	d.waitNextHops(t, vip, "node1", "node2", "node3")

	var withGshut, plain drainCount
	t.Run("drain: the router moves off the node while its session is up, then it withdraws", func(t *testing.T) {
		withGshut = d.drainRequests(t, lab, vip, d.clientPath(t, vip), gshutDelay, gshut)
	})

	t.Run("agent stop for a hand-over: graceful shutdown before the session closes", func(t *testing.T) {
		node := d.clientPath(t, vip)
		d.stopAgent(node)
		d.startAgent(lab, node, append([]string{"--on-stop", "handover"}, gshut...)...)
		d.waitNextHops(t, vip, "node1", "node2", "node3")
		start := time.Now()
		stopped := make(chan time.Duration, 1)
		go func() { d.stopAgent(node); stopped <- time.Since(start) }()
		depreferred := d.router.waitDepreferred(t, vip, node)
		withdrawn := d.waitNextHops(t, vip, others(node)...) + depreferred
		took := <-stopped
		t.Logf("%s's agent stopping for a hand-over: out of the router's paths after %s, its route withdrawn after %s, the agent stopped after %s",
			node, depreferred.Round(time.Millisecond), withdrawn.Round(time.Millisecond), took.Round(time.Millisecond))
		if took < gshutDelay {
			t.Errorf("the agent stopped after %s, before its graceful shutdown time (%s)", took, gshutDelay)
		}
		d.startAgent(lab, node, gshut...)
		d.waitNextHops(t, vip, "node1", "node2", "node3")
	})

	t.Run("iBGP: LOCAL_PREF 0 with the community, the router moves off the node before it withdraws", func(t *testing.T) {
		router2 := d.addRouter(t, "router2", "198.51.100.2", 64513)
		ibgp := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router2"},
			Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.2", PeerASN: 64513, MyASN: 64513}}
		if err := d.env.Admin.Create(ctx, ibgp); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = d.env.Admin.Delete(ctx, ibgp) })
		router2.waitNextHops(t, vip, "node1", "node2", "node3")
		const node = "node3"
		d.cordon(t, node, true)
		depreferred := router2.waitDepreferred(t, vip, node)
		withdrawn := router2.waitNextHops(t, vip, others(node)...) + depreferred
		t.Logf("iBGP router: cordoned %s out of its paths after %s, withdrawn after %s", node, depreferred.Round(time.Millisecond), withdrawn.Round(time.Millisecond))
		d.cordon(t, node, false)
		router2.waitNextHops(t, vip, "node1", "node2", "node3")
		d.waitNextHops(t, vip, "node1", "node2", "node3")
	})

	t.Run("drain without graceful shutdown: withdrawn at once", func(t *testing.T) {
		node := d.clientPath(t, vip)
		d.stopAgent(node)
		d.startAgent(lab, node, "--bgp-graceful-shutdown", "0")
		d.waitNextHops(t, vip, "node1", "node2", "node3")
		plain = d.drainRequests(t, lab, vip, node, 0, gshut)
	})
	t.Logf("drain-gshut: failed %d of %d", withGshut.failed, withGshut.total())
	t.Logf("drain-plain: failed %d of %d", plain.failed, plain.total())
}

// drainCount is what a request loop counted through a drain.
type drainCount struct{ ok, failed int64 }

func (c drainCount) total() int64 { return c.ok + c.failed }

// others are the lab's nodes but node.
func others(node string) []string {
	return slices.DeleteFunc([]string{"node1", "node2", "node3"}, func(n string) bool { return n == node })
}

// drainRequests drains node as kubectl drain does (cordon; the agent, a
// DaemonSet pod, is stopped last) while a request loop runs from the client
// through the router to vip, and counts the requests. With gshut (the node's
// --bgp-graceful-shutdown) the router must first leave node out of its best
// paths and its kernel route while still holding its path, and get the
// withdrawal only gshut later; without, the withdrawal comes at once. Every
// failed request must be a reset while the router moved the path (see
// endAcrossMoves). Afterwards node is uncordoned and its agent started again
// with restart (on logs), and all three nodes carry vip.
func (d *bgpLab) drainRequests(t, on testing.TB, vip, node string, gshut time.Duration, restart []string) drainCount {
	t.Helper()
	loop := d.curlLoop("http://" + vip + "/")
	time.Sleep(500 * time.Millisecond)
	move := pathMove{from: time.Now()}
	d.cordon(t, node, true)
	if gshut > 0 {
		depreferred := d.router.waitDepreferred(t, vip, node)
		move.to = time.Now()
		withdrawn := d.waitNextHops(t, vip, others(node)...) + depreferred
		t.Logf("cordoned %s: out of the router's paths after %s, its route withdrawn after %s", node,
			depreferred.Round(time.Millisecond), withdrawn.Round(time.Millisecond))
		if withdrawn < gshut-500*time.Millisecond {
			t.Errorf("withdrawn after %s, want after the graceful shutdown time (%s)", withdrawn, gshut)
		}
	} else {
		took := d.waitNextHops(t, vip, others(node)...)
		move.to = time.Now()
		t.Logf("cordoned %s: its route withdrawn after %s", node, took.Round(time.Millisecond))
	}
	d.stopAgent(node) // the drain evicts the agent last
	time.Sleep(time.Second)
	ok, failed := endAcrossMoves(t, loop, move)
	t.Logf("drained %s: %d requests, %d failed", node, ok+failed, failed)
	d.cordon(t, node, false)
	d.startAgent(on, node, restart...)
	d.waitNextHops(t, vip, "node1", "node2", "node3")
	return drainCount{ok, failed}
}

// waitDepreferred waits until this router holds node's path to vip with the
// GRACEFUL_SHUTDOWN community (its session up) but forwards only on the
// others: neither its best path nor in its multipath set, nor a next hop of
// its kernel route. It returns how long that took.
func (r *frr) waitDepreferred(t testing.TB, vip, node string) time.Duration {
	t.Helper()
	start := time.Now()
	testenv.Eventually(t, settle, fmt.Sprintf("router %s holds %s's path to %s in graceful shutdown, forwarding on the others", r.ns, node, vip), func() error {
		paths, err := r.paths(hostRoute(vip))
		if err != nil {
			return err
		}
		var installed []string
		held := false
		for _, p := range paths {
			var hops []string
			for _, nh := range p.Nexthops {
				hops = append(hops, nh.IP)
			}
			mine := slices.Contains(nodesOf(hops), node)
			if mine {
				if p.Community == nil || !strings.Contains(p.Community.String, "graceful-shutdown") || p.LocPrf != 0 {
					return fmt.Errorf("%s's path %+v: want community graceful-shutdown, local preference 0", node, p)
				}
				held = true
			}
			if p.installed() {
				installed = append(installed, nodesOf(hops)...)
			}
		}
		if !held {
			return fmt.Errorf("no path from %s (withdrawn already, or its session down)", node)
		}
		slices.Sort(installed)
		if want := others(node); !slices.Equal(installed, want) {
			return fmt.Errorf("bgpd's best and multipath set %v, want %v", installed, want)
		}
		if got := nodesOf(r.kernelNextHops(vip)); !slices.Equal(got, others(node)) {
			return fmt.Errorf("the kernel routes through %v", got)
		}
		return nil
	})
	return time.Since(start)
}
