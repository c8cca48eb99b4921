//go:build root && envtest

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// frrConfigBFDDynamic is frrConfig with BFD (bfdd's profile vipa) on the
// listen ranges' peer groups: every node is a dynamic neighbour, as in a
// fabric that names no node.
func frrConfigBFDDynamic(routerID string) string {
	conf := frrConfig(routerID)
	for group, listen := range map[string]string{"nodes": "198.51.100.0/24", "nodes6": "2001:db8:1::/64"} {
		conf = strings.Replace(conf, " bgp listen range "+listen+" peer-group "+group+"\n",
			" bgp listen range "+listen+" peer-group "+group+"\n neighbor "+group+" bfd profile vipa\n", 1)
	}
	return conf
}

// bgpUp maps each Established peer of family (ipv4, ipv6) to how long its
// session has been up: a reset, even of a dynamic neighbour FRR deletes and
// creates again, starts it over.
func (r *frr) bgpUp(family string) (map[string]time.Duration, error) {
	out, err := r.vtysh("show bgp " + family + " unicast summary json")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Peers map[string]struct {
			State  string `json:"state"`
			Uptime int64  `json:"peerUptimeMsec"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("parse %q: %w", out, err)
	}
	got := map[string]time.Duration{}
	for addr, p := range doc.Peers {
		if p.State == "Established" {
			got[addr] = time.Duration(p.Uptime) * time.Millisecond
		}
	}
	return got, nil
}

// bfdIDs maps the router's BFD sessions (by peer address) to their local
// discriminator and status: a session FRR replaced has a new discriminator.
func (r *frr) bfdIDs() (map[string]string, error) {
	out, err := r.vtysh("show bfd peers json")
	if err != nil {
		return nil, err
	}
	var peers []struct {
		Peer   string `json:"peer"`
		ID     uint32 `json:"id"`
		Status string `json:"status"`
	}
	if err := json.Unmarshal([]byte(out), &peers); err != nil {
		return nil, fmt.Errorf("parse %q: %w", out, err)
	}
	got := map[string]string{}
	for _, p := range peers {
		got[p.Peer] = fmt.Sprintf("%d %s", p.ID, p.Status)
	}
	return got, nil
}

// watchResets samples the router every 100 ms for d and counts, per node
// address of addrs, the BGP sessions that came up again or went down
// (resets) and the BFD sessions replaced or not up (BFD changes) after the
// first sample.
func (r *frr) watchResets(t testing.TB, family string, addrs []string, d time.Duration) (resets, bfdChanges map[string]int) {
	t.Helper()
	resets, bfdChanges = map[string]int{}, map[string]int{}
	var lastUp map[string]time.Duration
	var lastBFD map[string]string
	for end := time.Now().Add(d); time.Now().Before(end); time.Sleep(100 * time.Millisecond) {
		up, err := r.bgpUp(family)
		if err != nil {
			t.Fatal(err)
		}
		ids, err := r.bfdIDs()
		if err != nil {
			t.Fatal(err)
		}
		for _, a := range addrs {
			if lastUp != nil && (up[a] == 0 || up[a] < lastUp[a]) && lastUp[a] != 0 {
				resets[a]++
			}
			if lastBFD != nil && ids[a] != lastBFD[a] {
				bfdChanges[a]++
			}
		}
		lastUp, lastBFD = up, ids
	}
	return resets, bfdChanges
}

// TestBFDDynamic: BFD with a router that peers with the nodes as dynamic
// neighbours (FRR's 'bgp listen range' and 'neighbor <group> bfd'), which
// creates a neighbour, and its BFD session, anew each time a node connects,
// and replaces that BFD session when the BGP session comes up. The sessions
// stay up without a reset, BFD up on both sides, and a hung agent has its
// routes gone from the router by BFD, before BGP's hold timer (3 s) could
// have done it, in each of 5 freezes. How fast is make bench-bgp's figure.
func TestBFDDynamic(t *testing.T) {
	d := setupBGPRouter(t, func(l *lab) *frr {
		return startFRRWithBFD(t, l, "router", frrConfigBFDDynamic("198.51.100.1"), bfddConfig)
	})
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("router's BFD peers:\n%s", outputOrErr(d.router.vtysh("show bfd peers")))
			b, _ := os.ReadFile(filepath.Join(d.router.dir, "bfdd.log"))
			t.Logf("bfdd.log:\n%s", b)
		}
	})
	ctx := context.Background()
	peer := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"},
		Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513, BFD: &paasv1.BFDSettings{}}}
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp-vips"}, Spec: paasv1.IPGroupSpec{
		Segment: "203.0.113.128/25", Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}}
	for _, o := range []client.Object{peer, group} {
		if err := d.env.Admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	nodes := []string{"node1", "node2", "node3"}
	var addrs []string
	for _, n := range nodes {
		d.startAgent(t, n)
		addrs = append(addrs, bgpNodeIP[n])
	}
	web := d.bgpService(t, "web", false)
	webVIP := d.vipOf(t, web)

	t.Run("sessions come up with BFD and stay up without a reset", func(t *testing.T) {
		start := time.Now()
		d.peerCondition(t, paasv1.BGPPeerBFDUp, metav1.ConditionTrue, "BFD is up on 3 of 3 established sessions")
		testenv.Eventually(t, settle, "the router's BFD peers up", func() error {
			got, err := d.router.bfdPeers()
			if err != nil {
				return err
			}
			for _, a := range addrs {
				if got[a] != "up" {
					return fmt.Errorf("BFD peers %v: want %s up", got, a)
				}
			}
			return nil
		})
		t.Logf("BGP and BFD up on the router for all 3 nodes %s after the agents started", time.Since(start).Round(time.Millisecond))
		d.waitNextHops(t, webVIP, nodes...)
		const watch = 20 * time.Second
		resets, bfdChanges := d.router.watchResets(t, "ipv4", addrs, watch)
		t.Logf("over %s: BGP session resets at the router %v, BFD sessions replaced or down %v", watch, resets, bfdChanges)
		t.Logf("vtysh show bfd peers brief:\n%s", outputOrErr(d.router.vtysh("show bfd peers brief")))
		if len(resets) > 0 || len(bfdChanges) > 0 {
			t.Errorf("over %s the router reset BGP sessions %v and replaced BFD sessions %v: want none", watch, resets, bfdChanges)
		}
	})

	t.Run("a hung agent: the router drops its routes within BFD's detection time", func(t *testing.T) {
		var took []time.Duration
		for range 5 {
			d.router.waitBFDUp(t, map[string]string{"node2": bgpNodeIP["node2"]}, time.Minute)
			time.Sleep(time.Second) // a steady state
			agent := d.agents["node2"].Process
			start := time.Now()
			if err := agent.Signal(syscall.SIGSTOP); err != nil {
				t.Fatal(err)
			}
			d.router.waitGone(t, "ipv4", bgpNodeIP["node2"], 5*time.Second)
			took = append(took, time.Since(start))
			d.waitNextHops(t, webVIP, "node1", "node3")
			if err := agent.Signal(syscall.SIGCONT); err != nil {
				t.Fatal(err)
			}
			back := time.Now()
			d.waitNextHops(t, webVIP, nodes...)
			t.Logf("node2's agent frozen: its routes gone from the router after %s; resumed: its route back after %s",
				took[len(took)-1].Round(time.Millisecond), time.Since(back).Round(time.Millisecond))
		}
		t.Logf("hung agent, routes gone: median %s, worst %s (BFD 300 ms x 3; hold time 3 s)", median(took).Round(time.Millisecond), slices.Max(took).Round(time.Millisecond))
		if slices.Max(took) >= 3*time.Second {
			t.Errorf("routes gone after %v: want each before the hold time (3 s), dropped by BFD", took)
		}
		d.peerCondition(t, paasv1.BGPPeerBFDUp, metav1.ConditionTrue, "3 of 3")
		followed := 0
		for _, n := range nodes {
			b, _ := os.ReadFile(d.agentLogs[n])
			followed += strings.Count(string(b), "this one follows it")
		}
		t.Logf("the nodes' BFD sessions followed a new session of the router %d times", followed)
	})
}
