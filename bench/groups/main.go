// Command groups is 'make bench-groups': on the local control plane
// (hack/local-cluster.sh), with G IPGroups (a /24 each) and N held addresses
// (ledger IP objects, N/G per group) and a few Nodes, it runs the operator's
// IPGroup reconciler in this process, as the operator wires it, and measures
// the CPU this process spends (getrusage: the reconciles, the informers
// decoding the events, the status writes) on
//
//   - the baseline: one reconcile of one group, called directly R times on
//     groups whose status is current (the cost of reading, counting and
//     comparing it, no write);
//   - one Node annotation change: an agent publishes an interface on one
//     group's segment, until the reconciler is idle again;
//   - one IPGroup edit: an excluded address added to one group, until idle;
//
// each the median of R events, each minus the CPU of as long a wait with no
// event, with the group reconciles it caused and the ratio to the baseline:
// how many one-group reconciles an event costs. An event that reconciled
// every group would cost about G.
package main

import (
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	"go.uber.org/zap/zapcore"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/bench/internal/operatorproc"
	"github.com/paas-org/vip-allocator-operator/controllers/ipgroup"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/internal/reserved"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

func main() {
	groups := flag.Int("groups", 5000, "IPGroups, a /24 each")
	addresses := flag.Int("addresses", 100000, "held addresses (ledger IP objects), spread evenly over the groups")
	nodes := flag.Int("nodes", 3, "Nodes, each with an interface on the first group's segment")
	rounds := flag.Int("rounds", 5, "events of each kind measured; the figure is the median")
	flag.Parse()
	if err := run(*groups, *addresses, *nodes, max(*rounds, 1)); err != nil {
		fmt.Fprintln(os.Stderr, "bench-groups:", err)
		os.Exit(1)
	}
}

// segment is group i's /24.
func segment(i int) netip.Prefix {
	return netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i >> 8), byte(i), 0}), 24)
}

func groupName(i int) string { return fmt.Sprintf("g-%05d", i) }

func run(nGroups, nAddrs, nNodes, rounds int) error {
	if nGroups > 1<<16 || nAddrs/nGroups > 200 {
		return fmt.Errorf("at most 65536 groups of at most 200 held addresses each")
	}
	root := testenv.RepoRoot()
	cluster, err := operatorproc.ClusterUp(root, 17743, 13679) // ports of its own: make test runs the benches' smokes at once
	if err != nil {
		return err
	}
	defer cluster.Down()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	fmt.Printf("creating %d IPGroups, %d ledger objects, %d Nodes...\n", nGroups, nAddrs, nNodes)
	start := time.Now()
	if err := fanout.Run(32, nGroups, func(i int) error {
		return cluster.Admin.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: groupName(i)},
			Spec: paasv1.IPGroupSpec{Segment: segment(i).String()}})
	}); err != nil {
		return fmt.Errorf("create IPGroups: %w", err)
	}
	perGroup := nAddrs / nGroups
	// The ledger is the operator's to write (an admission policy): its client writes it.
	if err := fanout.Run(32, perGroup*nGroups, func(k int) error {
		i, j := k/perGroup, k%perGroup
		addr := segment(i).Addr().As4()
		addr[3] = byte(j + 1)
		a := netip.AddrFrom4(addr)
		name := fmt.Sprintf("svc-%d", k)
		return cluster.Operator.Create(ctx, &paasv1.IP{
			ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(a), Labels: map[string]string{paasv1.IPGroupLabel: groupName(i)},
				Annotations: map[string]string{paasv1.OwnerAnnotation: "bench/" + name}},
			Spec: paasv1.IPSpec{Address: a.String(), IPGroup: groupName(i),
				Owner: &paasv1.IPOwner{Namespace: "bench", Name: name, UID: types.UID(fmt.Sprintf("00000000-0000-0000-0000-%012d", k))}},
		}, paasv1.FieldOwner)
	}); err != nil {
		return fmt.Errorf("create ledger objects: %w", err)
	}
	for n := range nNodes {
		node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("node-%d", n),
			Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: interfaces(n)}}}
		if err := cluster.Admin.Create(ctx, node); err != nil {
			return fmt.Errorf("create Node: %w", err)
		}
	}
	fmt.Printf("created in %s\n", time.Since(start).Round(time.Millisecond))

	r, mgr, err := startReconciler(ctx, cluster.Dir)
	if err != nil {
		return err
	}
	start = time.Now()
	if err := waitAllCounted(ctx, mgr.GetClient(), nGroups, int64(perGroup), 10*time.Minute); err != nil {
		return err
	}
	if err := waitIdle(2*time.Second, 5*time.Minute); err != nil {
		return err
	}
	fmt.Printf("first pass over every group (informers' start included): %s wall, %d reconciles\n", time.Since(start).Round(time.Millisecond), reconciles())

	idle := measureIdle()
	baseline := measureBaseline(ctx, r, nGroups, max(rounds*10, 20))
	fmt.Printf("groups: %d, held addresses: %d, nodes: %d\n", nGroups, perGroup*nGroups, nNodes)
	fmt.Printf("baseline, one reconcile of one group: %.3f ms CPU (mean of %d)\n", ms(baseline), max(rounds*10, 20))
	fmt.Printf("idle: %.3f ms CPU in %s with no event (measured again before each event, and subtracted from its CPU)\n", ms(idle), eventWindow)

	nodeCPU, nodeRec, err := measureEvents(rounds, func(k int) error {
		// Each event moves node-0's second interface to another group's segment.
		return annotateNode(ctx, cluster.Admin, "node-0", interfaces(0, hostIn(segment(1+k%(nGroups-1)))))
	})
	if err != nil {
		return fmt.Errorf("Node annotation changes: %w", err)
	}
	report("one Node annotation change (an interface on one group's segment)", nodeCPU, nodeRec, baseline)

	editCPU, editRec, err := measureEvents(rounds, func(k int) error {
		name := groupName(1 + k%(nGroups-1))
		var g paasv1.IPGroup
		if err := cluster.Admin.Get(ctx, types.NamespacedName{Name: name}, &g); err != nil {
			return err
		}
		patch := client.MergeFrom(g.DeepCopy())
		g.Spec.ExcludedIPs = append(g.Spec.ExcludedIPs, hostIn(segment(1+k%(nGroups-1))).Addr().String())
		return cluster.Admin.Patch(ctx, &g, patch)
	})
	if err != nil {
		return fmt.Errorf("IPGroup edits: %w", err)
	}
	report("one IPGroup edit (an excluded address)", editCPU, editRec, baseline)
	fmt.Printf("every group reconciled once, for scale: %.1f ms CPU (%d × the baseline)\n", ms(baseline)*float64(nGroups), nGroups)
	return nil
}

// interfaces is node n's interfaces annotation: eth0 on the first group's
// segment, and an interface on each of extra.
func interfaces(n int, extra ...netip.Prefix) string {
	parts := []string{fmt.Sprintf(`{"name":"eth0","addrs":["%s"]}`, netip.PrefixFrom(netip.AddrFrom4([4]byte{10, 0, 0, byte(200 + n%50)}), 24))}
	for i, p := range extra {
		parts = append(parts, fmt.Sprintf(`{"name":"eth%d","addrs":["%s"]}`, i+1, p))
	}
	return "[" + strings.Join(parts, ",") + "]"
}

// hostIn is an address of p, with p's length, as an interface carries it.
func hostIn(p netip.Prefix) netip.Prefix {
	a := p.Addr().As4()
	a[3] = 240
	return netip.PrefixFrom(netip.AddrFrom4(a), p.Bits())
}

func annotateNode(ctx context.Context, c client.Client, name, value string) error {
	var n corev1.Node
	if err := c.Get(ctx, types.NamespacedName{Name: name}, &n); err != nil {
		return err
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Annotations[paasv1.NodeInterfacesAnnotation] = value
	return c.Patch(ctx, &n, patch)
}

// startReconciler runs a manager with the IPGroup reconciler alone, as the
// operator's ServiceAccount with no client-side rate limit.
func startReconciler(ctx context.Context, dir string) (*ipgroup.Reconciler, ctrl.Manager, error) {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.Level(zapcore.ErrorLevel)))
	cfg, err := operatorproc.UnlimitedConfig(filepath.Join(dir, "operator.kubeconfig"))
	if err != nil {
		return nil, nil, err
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: paasv1.NewScheme(), Metrics: metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0", Controller: config.Controller{SkipNameValidation: ptr.To(true)}})
	if err != nil {
		return nil, nil, err
	}
	reservedAddrs, err := reserved.NewSource(mgr, nil)
	if err != nil {
		return nil, nil, err
	}
	r := &ipgroup.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Reserved: reservedAddrs, OnCordon: election.OnCordonHandover}
	if err := r.SetupWithManager(mgr); err != nil {
		return nil, nil, err
	}
	go func() {
		if err := mgr.Start(ctx); err != nil {
			fmt.Fprintln(os.Stderr, "manager:", err)
		}
	}()
	return r, mgr, nil
}

// waitAllCounted waits until every group's status counts its addresses.
func waitAllCounted(ctx context.Context, c client.Reader, n int, perGroup int64, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var list paasv1.IPGroupList
		if err := c.List(ctx, &list, client.UnsafeDisableDeepCopy); err == nil {
			done := 0
			for i := range list.Items {
				if list.Items[i].Status.Allocated == perGroup && list.Items[i].Status.ObservedGeneration == list.Items[i].Generation {
					done++
				}
			}
			if done == n {
				return nil
			}
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("the groups' statuses did not count their addresses in %s", timeout)
}

// reconciles is the reconciler's count of reconciles so far.
func reconciles() int64 {
	families, _ := metrics.Registry.Gather()
	var total float64
	for _, f := range families {
		if f.GetName() != "controller_runtime_reconcile_total" {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "controller" && l.GetValue() == "ipgroup" {
					total += m.GetCounter().GetValue()
				}
			}
		}
	}
	return int64(total)
}

// waitIdle waits until no reconcile happened for quiet.
func waitIdle(quiet, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	last, since := reconciles(), time.Now()
	for time.Now().Before(deadline) {
		time.Sleep(pollEvery)
		if n := reconciles(); n != last {
			last, since = n, time.Now()
		} else if time.Since(since) >= quiet {
			return nil
		}
	}
	return fmt.Errorf("the reconciler was still busy after %s", timeout)
}

// cpu is this process's CPU time so far.
func cpu() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// measureIdle is the CPU of eventWindow with no event (informer resyncs,
// the runtime).
func measureIdle() time.Duration {
	from := cpu()
	time.Sleep(eventWindow)
	return cpu() - from
}

// pollEvery is how often the waits between measurements read the reconcile
// count (reading it costs: no measurement window polls).
const pollEvery = 50 * time.Millisecond

// measureBaseline is the mean CPU of one reconcile of one group whose status
// is current, called directly.
func measureBaseline(ctx context.Context, r *ipgroup.Reconciler, nGroups, n int) time.Duration {
	from := cpu()
	for k := range n {
		_, _ = r.Reconcile(ctx, ctrl.Request{NamespacedName: types.NamespacedName{Name: groupName(k % nGroups)}})
	}
	return (cpu() - from) / time.Duration(n)
}

// eventWindow is how long an event's CPU is counted: the controller batches
// Node and ledger events for a second (statusDelay), and then reconciles.
// Nothing polls in it; the reconciler must be idle at its end.
const eventWindow = 3 * time.Second

// measureEvents makes rounds events with do and returns the median CPU per
// event (minus the CPU of an as long window with no event, measured just
// before it) and the median reconciles per event.
func measureEvents(rounds int, do func(k int) error) (time.Duration, int64, error) {
	var cpus []time.Duration
	var recs []int64
	for k := range rounds {
		if err := waitIdle(time.Second, time.Minute); err != nil {
			return 0, 0, err
		}
		idle := measureIdle()
		rec0, from := reconciles(), cpu()
		if err := do(k); err != nil {
			return 0, 0, err
		}
		time.Sleep(eventWindow)
		used, rec := cpu()-from-idle, reconciles()-rec0
		time.Sleep(time.Second)
		if reconciles()-rec0 != rec {
			return 0, 0, fmt.Errorf("the reconciler was still busy %s after the event", eventWindow)
		}
		cpus = append(cpus, max(used, 0))
		recs = append(recs, rec)
	}
	slices.Sort(cpus)
	slices.Sort(recs)
	return cpus[len(cpus)/2], recs[len(recs)/2], nil
}

func report(what string, cpu time.Duration, recs int64, baseline time.Duration) {
	fmt.Printf("%s: %.3f ms CPU, %d group reconciles (median); ratio to one reconcile of one group: %.1f\n",
		what, ms(cpu), recs, float64(cpu)/float64(max(baseline, time.Microsecond)))
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
