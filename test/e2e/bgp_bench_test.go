//go:build root && envtest

package e2e

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/internal/procmem"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
)

// BenchmarkBGP is 'make bench-bgp', in the BGP lab with a second FRR router
// (router2) on the LAN: every node peers with both over IPv6 (the only
// documentation range with room for 1,000 VIPs). It measures, on the real
// agents against the real routers:
//   - the time from a Service getting its IP to its route being in FRR, for 1
//     Service, and for 1,000 created at once (from the last one allocated);
//   - the time from cordoning a node (a drain) to its 1,000 routes being gone
//     from both routers;
//   - the agents' resident memory with 1,000 routes and 2 peers;
//   - a hung node (its agent frozen with SIGSTOP): the time until its routes
//     leave both routers, 5 times on the hold timer (3 s), then 5 times with
//     BFD (300 ms x 3) on both BGPPeers, the routers running bfdd with the
//     nodes as static neighbours (bfd-static), and last 5 times with the
//     nodes as dynamic neighbours of the routers' listen range (bfd-dynamic);
//   - requests from the client through the router while the node they go
//     through is drained, with graceful shutdown (drain-gshut) and without
//     (drain-plain). Every other phase runs with graceful shutdown off.
//
// The baseline, in the same run against the same routers: a bare GoBGP
// speaker (nodeagent/bgp alone, no Kubernetes) in a fourth node namespace
// advertising, then withdrawing, 1,000 routes of its own: what BGP and FRR
// cost by themselves.
func BenchmarkBGP(b *testing.B) { benchBGP(b, 1000, 5) }

// TestBenchBGPSmoke is BenchmarkBGP at a size the normal test run affords (5
// Services, 5 bare routes, one hung-node run each way, the two drains), so the
// benchmark cannot rot.
func TestBenchBGPSmoke(t *testing.T) { benchBGP(t, 5, 1) }

func benchBGP(b testing.TB, n, hungRuns int) {
	// The routers run bfdd with BFD on the nodes' sessions from the start;
	// it comes up only once the BGPPeers ask for it too (hung-node phase).
	d := setupBGPRouter(b, func(l *lab) *frr {
		return startFRRWithBFD(b, l, "router", frrConfigBFD("198.51.100.1"), bfddConfig)
	})
	ctx := context.Background()
	d.addNS("router2", "bare")
	d.plug("router2", "eth0", "lan", "198.51.100.2/24", "2001:db8:1::2/64")
	d.plug("bare", "eth0", "lan", "198.51.100.14/24", "2001:db8:1::14/64")
	router2 := startFRRWithBFD(b, d.lab, "router2", frrConfigBFD("198.51.100.2"), bfddConfig)
	routers := []*frr{d.router, router2}

	objects := []client.Object{
		&paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "2001:db8:1::1", PeerASN: 64512, MyASN: 64513}},
		&paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router2"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "2001:db8:1::2", PeerASN: 64512, MyASN: 64513}},
		&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: paasv1.IPGroupSpec{
			Segment: "2001:db8:100::/112", Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}},
	}
	for _, o := range objects {
		if err := d.env.Admin.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	nodes := []string{"node1", "node2", "node3"}
	for _, node := range nodes {
		// Graceful shutdown off but for its own phase (drain-gshut): the
		// drain line times the withdrawal itself.
		d.startAgent(b, node, gshutOff...)
	}
	for _, r := range routers {
		r.waitReceived(b, bgpNodeIP6, 0, time.Minute)
	}

	fmt.Printf("\nBGP, 3 nodes, 2 FRR routers (IPv6 sessions), hold 3 s:\n")
	// First the hung node, on the hold timer then with BFD, which stays on
	// for the rest (it changes nothing in advertising or withdrawing).
	hold := d.benchHung(b, routers, "node2", hungRuns)
	for _, name := range []string{"router", "router2"} {
		var p paasv1.BGPPeer
		if err := d.env.Admin.Get(ctx, client.ObjectKey{Name: name}, &p); err != nil {
			b.Fatal(err)
		}
		patch := client.MergeFrom(p.DeepCopy())
		p.Spec.BFD = &paasv1.BFDSettings{}
		if err := d.env.Admin.Patch(ctx, &p, patch); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range routers {
		r.waitBFDUp(b, bgpNodeIP6, time.Minute)
	}
	withBFD := d.benchHung(b, routers, "node2", hungRuns)
	fmt.Printf("  hung node (SIGSTOP node2) → its routes gone from both routers, %d runs each:\n", hungRuns)
	fmt.Printf("    hold timer (3 s):   median %8s, worst %8s\n", median(hold).Round(time.Millisecond), slices.Max(hold).Round(time.Millisecond))
	fmt.Printf("    BFD (300 ms x 3):   median %8s, worst %8s   (target: median < 1s, worst < 1.5s)\n",
		median(withBFD).Round(time.Millisecond), slices.Max(withBFD).Round(time.Millisecond))
	fmt.Printf("    ratio, BFD / hold timer: median %.2fx\n", float64(median(withBFD))/float64(median(hold)))
	fmt.Printf("bfd-static: hung node → its routes gone from both routers, static neighbours, BFD 300 ms x 3, %d runs: %s\n", hungRuns, medianWorst(withBFD))
	one := d.benchServices(b, routers, 1)
	fmt.Printf("  1 Service:      its IP → its route in both routers from all 3 nodes   %8s\n", one.toRoutes.Round(time.Millisecond))
	many := d.benchServices(b, routers, n)
	fmt.Printf("  %d Services:  created → all hold IPs %s; last IP → all %d routes in both routers from all 3 nodes   %8s (target < 2s)\n",
		n, many.toIPs.Round(time.Millisecond), n, many.toRoutes.Round(time.Millisecond))

	var rss []string
	for _, node := range nodes {
		r, _ := procmem.Read(fmt.Sprint(d.agents[node].Process.Pid))
		rss = append(rss, fmt.Sprintf("%s %.0f MiB", node, r))
	}
	fmt.Printf("  agent RSS with %d routes and 2 peers: %s\n", n, strings.Join(rss, ", "))

	start := time.Now()
	d.cordon(b, "node2", true)
	for _, r := range routers {
		r.waitReceived(b, map[string]string{"node2": bgpNodeIP6["node2"]}, 0, 30*time.Second)
	}
	drain := time.Since(start)
	fmt.Printf("  drain (cordon node2) → its %d routes gone from both routers   %8s (target < 1s)\n", n, drain.Round(time.Millisecond))

	bare := startBareSpeaker(b, d.lab, "bare")
	for _, r := range routers {
		r.waitReceived(b, map[string]string{"bare": "2001:db8:1::14"}, 0, time.Minute)
	}
	start = time.Now()
	bare.do(b, fmt.Sprint("advertise ", n))
	for _, r := range routers {
		r.waitReceived(b, map[string]string{"bare": "2001:db8:1::14"}, n, time.Minute)
	}
	bareAdd := time.Since(start)
	start = time.Now()
	bare.do(b, "withdraw")
	for _, r := range routers {
		r.waitReceived(b, map[string]string{"bare": "2001:db8:1::14"}, 0, time.Minute)
	}
	bareWithdraw := time.Since(start)
	bareRSS := bare.do(b, "rss")
	fmt.Printf("\nbaseline, a bare GoBGP speaker (no Kubernetes), same routers:\n")
	fmt.Printf("  %d routes added → in both routers   %8s\n", n, bareAdd.Round(time.Millisecond))
	fmt.Printf("  %d routes withdrawn → gone from both routers   %8s\n", n, bareWithdraw.Round(time.Millisecond))
	fmt.Printf("  process RSS with %d routes and 2 peers: %s MiB\n", n, bareRSS)
	fmt.Printf("\nratios, agent / bare speaker: advertise %.1fx, withdraw on drain %.1fx\n",
		float64(many.toRoutes)/float64(bareAdd), float64(drain)/float64(bareWithdraw))

	// Last, the routers name no node: every node is a dynamic neighbour of
	// the listen range, BFD from its peer group, as in a fabric.
	d.cordon(b, "node2", false)
	for _, r := range routers {
		cmds := []string{"configure terminal", "router bgp 64512"}
		for _, n := range nodes {
			cmds = append(cmds, "no neighbor "+bgpNodeIP[n], "no neighbor "+bgpNodeIP6[n])
		}
		if _, err := r.vtysh(cmds...); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range routers {
		r.waitReceived(b, bgpNodeIP6, 0, time.Minute)
		r.waitBFDUp(b, bgpNodeIP6, time.Minute)
	}
	dynamic := d.benchHung(b, routers, "node2", hungRuns)
	fmt.Printf("\nbfd-dynamic: hung node → its routes gone from both routers, dynamic neighbours (listen range), BFD 300 ms x 3, %d runs: %s\n", hungRuns, medianWorst(dynamic))

	gshut, plain := d.benchDrains(b)
	fmt.Printf("\ndrain of the client's node, 3 nodes in ECMP behind the router (IPv4, eBGP), a request every 50 ms until the agent stopped:\n")
	fmt.Printf("drain-gshut: failed %d of %d\n", gshut.failed, gshut.total())
	fmt.Printf("drain-plain: failed %d of %d\n", plain.failed, plain.total())
}

// gshutOff are the agent flags that turn graceful shutdown off.
var gshutOff = []string{"--bgp-graceful-shutdown", "0"}

// benchDrains peers the nodes with the router over IPv4 too, gives backend1
// an IPv4 Service of a group of its own, and drains the node the client's
// requests go through twice: with graceful shutdown (its agent restarted
// with the default --bgp-graceful-shutdown, 5 s), then without. Each drain
// counts the client's requests (see drainRequests).
func (d *bgpLab) benchDrains(b testing.TB) (gshut, plain drainCount) {
	ctx := context.Background()
	for _, o := range []client.Object{
		&paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router-v4"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513,
			BFD: &paasv1.BFDSettings{}}},
		&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "web4"}, Spec: paasv1.IPGroupSpec{
			Segment: "203.0.113.128/25", Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}},
	} {
		if err := d.env.Admin.Create(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
	vip := d.vipOf(b, d.bgpService(b, "web", false))
	d.waitNextHops(b, vip, "node1", "node2", "node3")
	node := d.clientPath(b, vip)
	d.stopAgent(node)
	d.startAgent(b, node) // the default --bgp-graceful-shutdown
	d.waitNextHops(b, vip, "node1", "node2", "node3")
	gshut = d.drainRequests(b, b, vip, node, 5*time.Second, gshutOff)
	plain = d.drainRequests(b, b, vip, d.clientPath(b, vip), 0, gshutOff)
	return gshut, plain
}

// medianWorst is "median X s, worst Y s", as scripts read the bfd- lines.
func medianWorst(ds []time.Duration) string {
	return fmt.Sprintf("median %.3f s, worst %.3f s", median(ds).Seconds(), slices.Max(ds).Seconds())
}

// benchHung freezes node's agent runs times (SIGSTOP, as a hung node) with
// one Service advertised, and returns, for each run, the time until the
// node's route left both routers; between runs the agent resumes and its
// route comes back.
func (d *bgpLab) benchHung(b testing.TB, routers []*frr, node string, runs int) []time.Duration {
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hung"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol},
			Ports: []corev1.ServicePort{{Name: "http", Port: 80}}, AllocateLoadBalancerNodePorts: ptr.To(false)}}
	if err := d.env.Admin.Create(ctx, svc); err != nil {
		b.Fatal(err)
	}
	defer func() {
		_ = d.env.Admin.Delete(ctx, svc)
		for _, r := range routers {
			r.waitReceived(b, bgpNodeIP6, 0, time.Minute)
		}
	}()
	var out []time.Duration
	for range runs {
		for _, r := range routers {
			r.waitReceived(b, bgpNodeIP6, 1, 2*time.Minute)
		}
		time.Sleep(time.Second) // a steady state: keepalives and BFD packets flowing
		agent := d.agents[node].Process
		start := time.Now()
		if err := agent.Signal(syscall.SIGSTOP); err != nil {
			b.Fatal(err)
		}
		for _, r := range routers {
			r.waitGone(b, "ipv6", bgpNodeIP6[node], 30*time.Second)
		}
		out = append(out, time.Since(start))
		if err := agent.Signal(syscall.SIGCONT); err != nil {
			b.Fatal(err)
		}
	}
	for _, r := range routers {
		r.waitReceived(b, bgpNodeIP6, 1, 2*time.Minute)
	}
	return out
}

// waitBFDUp waits until the router's BFD sessions with peers (by address) are up.
func (r *frr) waitBFDUp(b testing.TB, peers map[string]string, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := r.bfdPeers()
		ok := err == nil
		for _, addr := range peers {
			if got[addr] != "up" {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("router %s: BFD peers %v (%v), want %v up", r.ns, got, err, peers)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}

// serviceTimes are the phases of a batch of Services.
type serviceTimes struct {
	toIPs    time.Duration // from the first create until every Service holds an IP
	toRoutes time.Duration // from then until every node's route for every one is in every router
}

// benchServices creates n IPv6 LoadBalancer Services of the bench group at
// once, times them into the routers, then deletes them and waits until the
// routes are gone.
func (d *bgpLab) benchServices(b testing.TB, routers []*frr, n int) serviceTimes {
	ctx := context.Background()
	name := func(i int) string { return fmt.Sprintf("bench-%d-%d", n, i) }
	start := time.Now()
	err := fanout.Run(16, n, func(i int) error {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name(i), Labels: map[string]string{"bench": fmt.Sprint(n)}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}}, AllocateLoadBalancerNodePorts: ptr.To(false)}}
		return d.env.Admin.Create(ctx, svc)
	})
	if err != nil {
		b.Fatal(err)
	}
	var t serviceTimes
	deadline := time.Now().Add(2 * time.Minute)
	for {
		var list corev1.ServiceList
		if err := d.env.Admin.List(ctx, &list, client.MatchingLabels{"bench": fmt.Sprint(n)}); err != nil {
			b.Fatal(err)
		}
		held := 0
		for _, s := range list.Items {
			if len(s.Status.LoadBalancer.Ingress) > 0 {
				held++
			}
		}
		if held == n {
			t.toIPs = time.Since(start)
			break
		}
		if time.Now().After(deadline) {
			b.Fatalf("%d of %d Services hold an IP after 2 minutes", held, n)
		}
		time.Sleep(10 * time.Millisecond)
	}
	allocated := time.Now()
	for _, r := range routers {
		r.waitReceived(b, bgpNodeIP6, n, time.Minute)
	}
	t.toRoutes = time.Since(allocated)
	// A loaded API server may fail a collection delete (a timeout, a reset
	// stream) while it goes on deleting: ask again until it completes.
	for try := 0; ; try++ {
		err := d.env.Admin.DeleteAllOf(ctx, &corev1.Service{}, client.InNamespace("default"), client.MatchingLabels{"bench": fmt.Sprint(n)})
		if err == nil {
			break
		}
		if try == 5 {
			b.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
	for _, r := range routers {
		r.waitReceived(b, bgpNodeIP6, 0, 2*time.Minute)
	}
	return t
}

// waitReceived waits until the router holds exactly want IPv6 routes from
// each of peers (by address), every session Established.
func (r *frr) waitReceived(b testing.TB, peers map[string]string, want int, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		got, err := r.received()
		ok := err == nil
		for _, addr := range peers {
			if c, up := got[addr]; !up || c != want {
				ok = false
			}
		}
		if ok {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("router %s: routes received %v (%v), want %d from each of %v", r.ns, got, err, want, peers)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// received maps each Established IPv6 peer to the routes the router holds from it.
func (r *frr) received() (map[string]int, error) { return r.receivedFamily("ipv6") }

// receivedFamily maps each Established peer of family (ipv4, ipv6) to the
// routes the router holds from it.
func (r *frr) receivedFamily(family string) (map[string]int, error) {
	out, err := r.vtysh("show bgp " + family + " unicast summary json")
	if err != nil {
		return nil, err
	}
	var doc struct {
		Peers map[string]struct {
			State  string `json:"state"`
			PfxRcd int    `json:"pfxRcd"`
		} `json:"peers"`
	}
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("parse %q: %w", out, err)
	}
	got := map[string]int{}
	for addr, p := range doc.Peers {
		if p.State == "Established" {
			got[addr] = p.PfxRcd
		}
	}
	return got, nil
}

// bareSpeaker is the baseline: nodeagent/bgp driven directly, in a process of
// its own in a lab namespace (the test binary, re-run; see TestMain).
type bareSpeaker struct {
	in  io.Writer
	out *bufio.Scanner
}

func startBareSpeaker(b testing.TB, l *lab, ns string) *bareSpeaker {
	c := exec.Command("ip", "netns", "exec", l.ns(ns), os.Args[0])
	c.Env = append(os.Environ(), "VIPA_BARE_SPEAKER=1")
	in, err := c.StdinPipe()
	if err != nil {
		b.Fatal(err)
	}
	out, err := c.StdoutPipe()
	if err != nil {
		b.Fatal(err)
	}
	c.Stderr = os.Stderr
	if err := c.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Process.Kill(); _ = c.Wait() })
	return &bareSpeaker{in: in, out: bufio.NewScanner(out)}
}

// do sends one command and returns the speaker's answer.
func (s *bareSpeaker) do(b testing.TB, cmd string) string {
	if _, err := fmt.Fprintln(s.in, cmd); err != nil {
		b.Fatal(err)
	}
	if !s.out.Scan() {
		b.Fatalf("bare speaker: no answer to %q", cmd)
	}
	return s.out.Text()
}

// runBareSpeaker peers with both lab routers as the node 2001:db8:1::14 and
// obeys stdin: "advertise N" (N /128 routes at once), "withdraw", "rss".
func runBareSpeaker() {
	ctx := context.Background()
	s := bgp.New(logr.Discard())
	peer := func(name, addr string) bgp.Peer {
		return bgp.Peer{Name: name, Address: netip.MustParseAddr(addr), Port: 179, PeerASN: 64512, MyASN: 64513, Hold: 3 * time.Second, Keepalive: time.Second}
	}
	if err := s.Configure(ctx, bgp.Config{RouterID: netip.MustParseAddr("198.51.100.14"),
		Peers: []bgp.Peer{peer("router", "2001:db8:1::1"), peer("router2", "2001:db8:1::2")}}); err != nil {
		fmt.Fprintln(os.Stderr, "bare speaker:", err)
		os.Exit(1)
	}
	in := bufio.NewScanner(os.Stdin)
	for in.Scan() {
		var answer string
		switch f := strings.Fields(in.Text()); f[0] {
		case "advertise":
			var n int
			fmt.Sscan(f[1], &n)
			var routes []bgp.Route
			base := netip.MustParseAddr("2001:db8:200::1")
			for range n {
				routes = append(routes, bgp.Route{Prefix: netip.PrefixFrom(base, 128)})
				base = base.Next()
			}
			answer = fmt.Sprint(s.Advertise(ctx, routes))
		case "withdraw":
			answer = fmt.Sprint(s.Advertise(ctx, nil))
		case "rss":
			rss, _ := procmem.Read("self")
			answer = fmt.Sprintf("%.0f", rss)
		}
		fmt.Println(answer)
	}
}
