//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	"golang.org/x/net/icmp"
	"golang.org/x/net/ipv6"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// BenchmarkAnnounce is 'make bench-announce': 1,000 LoadBalancer Services
// created at once in the L2 lab (three agents), timed until every VIP is
// answered on the LAN by its owner, the one node the ledger names, and by no
// other node. The VIPs are IPv6, answered by NDP: the IPv4 documentation
// ranges hold fewer than 1,000 addresses on one LAN.
//
// Phases: created → every Service holds an IP (the operator); the last IP →
// every VIP answered by exactly one node; → every answer from the node the
// ledger names (the agents' claims written).
//
// Two baselines from the same run: the API server creating as many ClusterIP
// Services, and its floor for the writes the pipeline itself makes per
// Service (pipelineFloor): what the API server alone needs for them.
func BenchmarkAnnounce(b *testing.B) { benchAnnounce(b, 1000) }

// TestBenchAnnounceSmoke is BenchmarkAnnounce with 5 Services, so the
// benchmark cannot rot.
func TestBenchAnnounceSmoke(t *testing.T) { benchAnnounce(t, 5) }

func benchAnnounce(tb testing.TB, n int) {
	d := setupL2DualStack(tb)
	ctx := context.Background()
	if err := d.env.Admin.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan6"},
		Spec: paasv1.IPGroupSpec{Segment: "2001:db8::/64", ExcludedIPs: []string{"2001:db8::/120"}}}); err != nil {
		tb.Fatal(err)
	}
	// The floor, before the agents start (nothing but the API server acts
	// on its objects) and before any batch.
	floor := d.pipelineFloor(tb, n)
	// memberlist's LAN timers: on a machine shared with other work a starved
	// agent looks dead to the tuned timers for a moment, its VIPs move, and
	// the run measures a failover instead (bench-failover's subject).
	for _, node := range []string{"node1", "node2", "node3"} {
		d.startAgent(tb, node, "--liveness-timers", "lan", "--metrics-bind-address", "127.0.0.1:19478", "--metrics-secure=false")
	}
	// The agents settle (they published their interfaces and see each
	// other) before the burst: what is measured is the burst, not the start.
	testenv.Eventually(tb, settle, "every agent published its interfaces", func() error {
		var nodes corev1.NodeList
		if err := d.env.Admin.List(ctx, &nodes); err != nil {
			return err
		}
		for _, n := range nodes.Items {
			if _, ok := n.Annotations[paasv1.NodeInterfacesAnnotation]; !ok {
				return fmt.Errorf("%s has not", n.Name)
			}
		}
		return nil
	})
	one := d.announceBatch(tb, "warm", 1)
	one.deleteAll(tb)

	// The baseline: the API server creating as many Services that need
	// nothing of us (ClusterIP), the same way, in the same lab. "At once" is
	// as fast as it creates them.
	baseline := d.createServices(tb, "baseline", n, corev1.ServiceTypeClusterIP)
	if err := d.env.Admin.DeleteAllOf(context.Background(), &corev1.Service{}, client.InNamespace("default"), client.MatchingLabels{"bench": "baseline"}); err != nil {
		tb.Fatal(err)
	}

	fmt.Printf("\nL2 announcement, 3 nodes (IPv6, NDP):\n")
	cpu0, passes0 := d.agentsCPU(), d.reconcileTimes()
	r := d.announceBatch(tb, "bench", n)
	cpu, passes := d.agentsCPU()-cpu0, d.reconcileTimes()
	total := r.toIPs + r.toOwned
	fmt.Printf("  baseline: the API server creates %d ClusterIP Services (16 clients) in %s\n", n, baseline.Round(time.Millisecond))
	fmt.Printf("  floor: the API server alone makes the pipeline's 5 writes for %d LoadBalancer Services (16 clients, no rate limit) in %s\n", n, floor.Round(time.Millisecond))
	fmt.Printf("  %d LoadBalancer Services created at once, the last created after %s\n", n, r.toCreated.Round(time.Millisecond))
	fmt.Printf("  %d Services created at once → all hold IPs          %8s\n", n, r.toIPs.Round(time.Millisecond))
	fmt.Printf("    last IP → every VIP answered by exactly one node  %8s\n", r.toAnswered.Round(time.Millisecond))
	fmt.Printf("    last IP → every VIP answered by the node the ledger names  %8s\n", r.toOwned.Round(time.Millisecond))
	fmt.Printf("  created → every VIP answered by its owner: %s (target < 5s); last created → all answered by their owners: %s\n",
		total.Round(time.Millisecond), (total - r.toCreated).Round(time.Millisecond))
	fmt.Printf("  ratio, created → all answered / the baseline's creation: %.2f\n", total.Seconds()/baseline.Seconds())
	fmt.Printf("  ratio, floor / ours (created → all answered): %.2f\n", floor.Seconds()/total.Seconds())
	fmt.Printf("  the three agents' CPU over the batch: %.2f s (%.2f ms per Service); in their passes (wall time, all three):\n", cpu, 1000*cpu/float64(n))
	for _, c := range []string{"announce", "dataplane", "announce: read and decide, full", "announce: read and decide, incremental"} {
		p := passes[c].minus(passes0[c])
		fmt.Printf("    %-40s %5d passes, %7.2f s, %6.2f ms per pass\n", c, p.count, p.seconds, 1000*p.seconds/max(1, float64(p.count)))
	}
	r.deleteAll(tb)
}

// agentsCPU is the CPU seconds the lab's agents have used so far.
func (d *l2Lab) agentsCPU() float64 {
	var sum float64
	for _, c := range d.agents {
		cpu, _ := procSample(c.Process.Pid)
		sum += cpu
	}
	return sum
}

// passTimes are a controller's reconciles so far, summed over the agents.
type passTimes struct {
	count   int
	seconds float64
}

func (p passTimes) minus(q passTimes) passTimes {
	return passTimes{count: p.count - q.count, seconds: p.seconds - q.seconds}
}

// reconcileTimes reads, by controller (announce, dataplane), how many
// reconciles the agents ran and how long they took (controller-runtime's
// reconcile_time histogram), and the same of the announcer's reading and
// deciding alone, by kind of pass.
func (d *l2Lab) reconcileTimes() map[string]passTimes {
	out := map[string]passTimes{}
	add := func(node, key, histogram, labels string) {
		p := out[key]
		n, _ := strconv.Atoi(d.agentMetric(node, histogram+"_count"+labels))
		s, _ := strconv.ParseFloat(d.agentMetric(node, histogram+"_sum"+labels), 64)
		p.count, p.seconds = p.count+n, p.seconds+s
		out[key] = p
	}
	for node := range d.agents {
		for _, c := range []string{"announce", "dataplane"} {
			add(node, c, "controller_runtime_reconcile_time_seconds", `{controller="`+c+`"}`)
		}
		// The announcer's own reading and deciding, without its writes (an
		// agent built before the metric reports none).
		for _, kind := range []string{"full", "incremental"} {
			add(node, "announce: read and decide, "+kind, "vip_allocator_agent_announce_decide_seconds", `{kind="`+kind+`"}`)
		}
	}
	return out
}

// announceRun is one batch of Services and how long its phases took.
type announceRun struct {
	d                                     *l2Lab
	label                                 string
	toCreated, toIPs, toAnswered, toOwned time.Duration
}

// announceBatch creates n IPv6 LoadBalancer Services labelled bench=label at
// once and waits until each VIP is answered by its owner.
func (d *l2Lab) announceBatch(tb testing.TB, label string, n int) announceRun {
	tb.Helper()
	r := announceRun{d: d, label: label}
	// The VIPs are read from a watch opened before the burst: polling a list
	// of 1,000 Services as fast as the answers come would load the API server
	// the operator is measured against.
	held := d.watchIngress(tb, label)
	start := time.Now()
	r.toCreated = d.createServices(tb, label, n, corev1.ServiceTypeLoadBalancer)
	vips := held(n, 2*time.Minute)
	allocated := time.Now()
	r.toIPs = allocated.Sub(start)
	r.toAnswered, r.toOwned = d.untilOwnersAnswer(tb, vips, allocated, 2*time.Minute)
	return r
}

// createServices creates n IPv6 Services of type typ labelled bench=label,
// 16 at a time, and returns how long that took.
func (d *l2Lab) createServices(tb testing.TB, label string, n int, typ corev1.ServiceType) time.Duration {
	tb.Helper()
	start := time.Now()
	if err := fanout.Run(16, n, func(i int) error {
		svc := &corev1.Service{
			ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("%s-%d", label, i), Labels: map[string]string{"bench": label}},
			Spec: corev1.ServiceSpec{Type: typ, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol},
				Ports: []corev1.ServicePort{{Name: "http", Port: 80}}}}
		if typ == corev1.ServiceTypeLoadBalancer {
			svc.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
		}
		return d.env.Admin.Create(context.Background(), svc)
	}); err != nil {
		tb.Fatal(err)
	}
	return time.Since(start)
}

// watchIngress watches the Services labelled bench=label; the function it
// returns waits until n of them hold an IP and returns those IPs (failing tb
// after patience).
func (d *l2Lab) watchIngress(tb testing.TB, label string) func(n int, patience time.Duration) []netip.Addr {
	tb.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	tb.Cleanup(cancel)
	wc, err := client.NewWithWatch(d.env.AdminConfig, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		tb.Fatal(err)
	}
	var list corev1.ServiceList
	if err := wc.List(ctx, &list, client.MatchingLabels{"bench": label}); err != nil {
		tb.Fatal(err)
	}
	w, err := wc.Watch(ctx, &corev1.ServiceList{}, client.MatchingLabels{"bench": label}, &client.ListOptions{Raw: &metav1.ListOptions{ResourceVersion: list.ResourceVersion}})
	if err != nil {
		tb.Fatal(err)
	}
	return func(n int, patience time.Duration) []netip.Addr {
		defer w.Stop()
		vips := map[string]netip.Addr{}
		timeout := time.After(patience)
		for len(vips) < n {
			select {
			case ev, open := <-w.ResultChan():
				if !open {
					tb.Fatalf("the watch of the Services ended with %d of %d holding an IP", len(vips), n)
				}
				if s, ok := ev.Object.(*corev1.Service); ok && len(s.Status.LoadBalancer.Ingress) > 0 {
					vips[s.Name] = netip.MustParseAddr(s.Status.LoadBalancer.Ingress[0].IP)
				}
			case <-timeout:
				tb.Fatalf("%d of %d Services hold an IP after %s", len(vips), n, patience)
			}
		}
		return slices.Collect(maps.Values(vips))
	}
}

// deleteAll deletes the batch and waits until no VIP of it is left in the ledger.
func (r announceRun) deleteAll(tb testing.TB) {
	tb.Helper()
	ctx := context.Background()
	for try := 0; ; try++ {
		err := r.d.env.Admin.DeleteAllOf(ctx, &corev1.Service{}, client.InNamespace("default"), client.MatchingLabels{"bench": r.label})
		if err == nil {
			break
		}
		if try == 5 {
			tb.Fatal(err)
		}
		time.Sleep(2 * time.Second)
	}
	testenv.Eventually(tb, settle, "the ledger is empty", func() error {
		var ips paasv1.IPList
		if err := r.d.env.Admin.List(ctx, &ips); err != nil {
			return err
		}
		if len(ips.Items) > 0 {
			return fmt.Errorf("%d IPs left", len(ips.Items))
		}
		return nil
	})
}

// untilOwnersAnswer solicits every VIP from the client, round after round,
// until each is answered by exactly one node (answered, from since) and that
// node is the one its ledger entry names (owned). A VIP counts once it passed
// in one round; a last round over all of them checks that none moved or
// gained a second answer since.
func (d *l2Lab) untilOwnersAnswer(tb testing.TB, vips []netip.Addr, since time.Time, timeout time.Duration) (answered, owned time.Duration) {
	tb.Helper()
	macNode := map[string]string{}
	for node, mac := range d.macs {
		macNode[mac] = node
	}
	p := d.ndpProber(tb)
	singly, confirmed := map[netip.Addr]bool{}, map[netip.Addr]bool{}
	deadline := time.Now().Add(timeout)
	var last map[netip.Addr][]string
	for len(confirmed) < len(vips) {
		if time.Now().After(deadline) {
			tb.Fatalf("after %s, %d of %d VIPs answered by one node, %d by the node the ledger names; e.g. %s", timeout, len(singly), len(vips), len(confirmed), sample(vips, confirmed, last, d.ledgerOwners(tb)))
		}
		var pending []netip.Addr
		for _, v := range vips {
			if !confirmed[v] {
				pending = append(pending, v)
			}
		}
		owners := d.ledgerOwners(tb)
		last = p.round(tb, pending)
		for _, v := range pending {
			macs := last[v]
			if len(macs) != 1 || macNode[macs[0]] == "" {
				continue
			}
			if !singly[v] {
				singly[v] = true
				if len(singly) == len(vips) {
					answered = time.Since(since)
				}
			}
			if macNode[macs[0]] == owners[v] {
				confirmed[v] = true
			}
		}
	}
	owned = time.Since(since)
	if answered == 0 {
		answered = owned
	}
	// The last round: a wrong or a second answer fails at once; a VIP
	// unanswered (a late answer on a loaded machine) is asked again.
	owners, unheard := d.ledgerOwners(tb), vips
	for try := 0; len(unheard) > 0; try++ {
		if try == 10 {
			tb.Fatalf("%d VIPs no longer answered, e.g. %s (the ledger names %q)", len(unheard), unheard[0], owners[unheard[0]])
		}
		final, again := p.round(tb, unheard), []netip.Addr(nil)
		for _, v := range unheard {
			switch macs := final[v]; {
			case len(macs) == 0:
				again = append(again, v)
			case len(macs) != 1 || macNode[macs[0]] != owners[v]:
				tb.Fatalf("%s: answered by %v, the ledger names %q", v, macs, owners[v])
			}
		}
		unheard = again
	}
	return answered, owned
}

// sample describes one VIP not yet confirmed, for a failure message.
func sample(vips []netip.Addr, confirmed map[netip.Addr]bool, last map[netip.Addr][]string, owners map[netip.Addr]string) string {
	for _, v := range vips {
		if !confirmed[v] {
			return fmt.Sprintf("%s answered by %v, ledger names %q", v, last[v], owners[v])
		}
	}
	return ""
}

// ledgerOwners maps each VIP in the ledger to the one node announcing it.
func (d *l2Lab) ledgerOwners(tb testing.TB) map[netip.Addr]string {
	var ips paasv1.IPList
	if err := d.env.Admin.List(context.Background(), &ips); err != nil {
		tb.Fatal(err)
	}
	out := map[netip.Addr]string{}
	for _, ip := range ips.Items {
		if a, err := netip.ParseAddr(ip.Spec.Address); err == nil && len(ip.Status.AnnouncedBy) == 1 {
			out[a] = ip.Status.AnnouncedBy[0]
		}
	}
	return out
}

// ndpProber solicits many VIPs at once from the client's LAN interface.
type ndpProber struct {
	conn *ndp.Conn // reads the advertisements
	// out sends the solicitations: ndp.Conn names the interface by its name,
	// which Go resolves in a process-wide cache that other namespaces' eth0
	// may have filled; this socket gives the index instead.
	out     *ipv6.PacketConn
	ifIndex int
	mac     net.HardwareAddr
}

func (d *l2Lab) ndpProber(tb testing.TB) *ndpProber {
	tb.Helper()
	p := &ndpProber{}
	var raw *icmp.PacketConn
	if err := d.inNetns("client", func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		p.mac, p.ifIndex = ifi.HardwareAddr, ifi.Index
		if p.conn, _, err = ndp.Listen(ifi, ndp.LinkLocal); err != nil {
			return err
		}
		raw, err = icmp.ListenPacket("ip6:ipv6-icmp", "::")
		return err
	}); err != nil {
		tb.Fatal(err)
	}
	p.out = raw.IPv6PacketConn()
	tb.Cleanup(func() { p.conn.Close(); raw.Close() })
	return p
}

// round solicits every vip (a Neighbor Solicitation to its solicited-node
// group, as a resolving host sends) and returns the distinct MACs of the
// solicited advertisements heard for each within 150 ms of the last one sent (the resolution of the times).
func (p *ndpProber) round(tb testing.TB, vips []netip.Addr) map[netip.Addr][]string {
	tb.Helper()
	want := make(map[netip.Addr]bool, len(vips))
	for _, v := range vips {
		want[v] = true
	}
	heard := make(chan map[netip.Addr][]string)
	stop := time.Now().Add(time.Hour)
	_ = p.conn.SetReadDeadline(stop)
	go func() {
		out := map[netip.Addr][]string{}
		for {
			m, _, _, err := p.conn.ReadFrom()
			if err != nil {
				heard <- out
				return
			}
			na, ok := m.(*ndp.NeighborAdvertisement)
			if !ok || !na.Solicited || !want[na.TargetAddress] {
				continue
			}
			for _, o := range na.Options {
				if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Target {
					mac := strings.ToLower(lla.Addr.String())
					if !slices.Contains(out[na.TargetAddress], mac) {
						out[na.TargetAddress] = append(out[na.TargetAddress], mac)
					}
				}
			}
		}
	}()
	// Hop limit 255: a neighbour drops Neighbor Discovery that crossed a router.
	cm := &ipv6.ControlMessage{HopLimit: 255, IfIndex: p.ifIndex}
	for _, v := range vips {
		group, err := ndp.SolicitedNodeMulticast(v)
		if err != nil {
			tb.Fatal(err)
		}
		b, err := ndp.MarshalMessage(&ndp.NeighborSolicitation{TargetAddress: v, Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: p.mac}}})
		if err != nil {
			tb.Fatal(err)
		}
		if _, err := p.out.WriteTo(b, cm, &net.IPAddr{IP: group.AsSlice()}); err != nil {
			tb.Fatalf("solicit %s: %v", v, err)
		}
	}
	_ = p.conn.SetReadDeadline(time.Now().Add(150 * time.Millisecond))
	return <-heard
}
