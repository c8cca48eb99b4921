// Command migrate is 'make bench-migrate': on the local control plane
// (hack/local-cluster.sh), for each size N it builds N legacy VirtualIPs
// exactly as the original operator left them, twice, and measures
//
//   - the baseline: a plain client making the minimal writes of a migration
//     per VirtualIP (Service to LoadBalancer, ledger relabel, Service status;
//     then, after the same cutover delay, clone delete, loadBalancerIP
//     clear, finalizers, VirtualIP status), with the operator's concurrency and
//     no client-side rate limit;
//   - the operator (bin/vip-allocator, a real process): time from annotating
//     all N (as 'vip-allocator migrate all' does) until all are Migrated, its
//     API writes per VirtualIP (its client's request counter), and how many
//     Services ended with another IP than their VirtualIP's, or shared one.
//
// The keepalived clone goes only once the Service's Announced condition is
// True. The VirtualIPs' segment is held by an IPGroup with announce.mode None
// (made beforehand, as an admin who routes the segment to the nodes would; the
// migration takes an existing covering group instead of making one from the
// GroupSegmentMapping): for such a group the operator itself reports Announced
// (reason StaticRouting), so no agent is needed. With L2 or BGP the agents'
// announcement (their ledger status writes) would come on top; e2e
// TestMigrationWithoutDowntime runs that path with real agents, but N=1,000 VIPs do not
// fit the IPv4 documentation ranges the network-namespace tests may use.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/bench/internal/operatorproc"
	"github.com/paas-org/vip-allocator-operator/cmd"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/migration"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

const (
	probeAddr   = "127.0.0.1:18281"
	metricsAddr = "127.0.0.1:18280"
)

func main() {
	sizes := flag.String("n", "300,1000", "numbers of VirtualIPs, comma-separated")
	workers := flag.Int("workers", 8, "operator --migration-workers (its default), and the baseline's concurrency")
	delay := flag.Duration("cutover-delay", migration.DefaultCutoverDelay, "operator --migration-cutover-delay, and the baseline's wait")
	flag.Parse()
	ctrl.SetLogger(logr.Discard()) // the in-process "migrate all" client logs nothing worth reading here
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 || n > 60000 {
			fmt.Fprintf(os.Stderr, "bench-migrate: -n: %q is not a size between 1 and 60000\n", s)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	if err := run(ns, *workers, *delay); err != nil {
		fmt.Fprintln(os.Stderr, "bench-migrate:", err)
		os.Exit(1)
	}
}

type result struct {
	n                       int
	baseline, operator      time.Duration
	baseWrites, opWrites    float64
	changed, doubled, wrong int
}

func run(sizes []int, workers int, delay time.Duration) error {
	root := testenv.RepoRoot()
	cluster, err := operatorproc.ClusterUp(root, 17543, 13479)
	if err != nil {
		return err
	}
	defer cluster.Down()
	dir, admin, operator := cluster.Dir, cluster.Admin, cluster.Operator
	ctx := context.Background()
	var results []result
	for i, n := range sizes {
		r, err := runSize(ctx, root, dir, admin, operator, n, i, workers, delay)
		if err != nil {
			return fmt.Errorf("N=%d: %w", n, err)
		}
		results = append(results, r)
	}
	fmt.Printf("\nbench-migrate: legacy VirtualIPs migrated at once, %d workers, cutover delay %s, local kube-apiserver v1.36.3\n", workers, delay)
	fmt.Println("  their IPGroup has announce.mode None: the operator reports them Announced (StaticRouting) itself, no agent runs")
	fmt.Printf("  %6s  %12s  %12s  %7s  %16s  %16s  %11s  %11s\n", "N", "baseline", "operator", "ratio", "writes/VIP base", "writes/VIP op", "IPs changed", "IPs doubled")
	bad := 0
	for _, r := range results {
		fmt.Printf("  %6d  %11.2fs  %11.2fs  %7.2f  %16.1f  %16.1f  %11d  %11d\n", r.n, r.baseline.Seconds(), r.operator.Seconds(),
			r.baseline.Seconds()/r.operator.Seconds(), r.baseWrites, r.opWrites, r.changed, r.doubled)
		bad += r.changed + r.doubled + r.wrong
	}
	fmt.Println("  ratio = baseline time / operator time (1.0: as fast as the bare writes); the operator's writes include its status reports and Events")
	if bad > 0 {
		return fmt.Errorf("%d IPs changed, doubled or left unmigrated", bad)
	}
	return nil
}

func runSize(ctx context.Context, root, dir string, admin, operator client.Client, n, round, workers int, delay time.Duration) (result, error) {
	r := result{n: n}
	benchNS, baseNS := fmt.Sprintf("migrate-%d", n), fmt.Sprintf("baseline-%d", n)
	gsm, baseGSM := fmt.Sprintf("gsm-%d", n), fmt.Sprintf("gsm-baseline-%d", n)
	for _, ns := range []string{benchNS, baseNS} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return r, err
		}
	}
	benchIPs, baseIPs := addrs(10, byte(20+2*round), n), addrs(10, byte(21+2*round), n)
	for name, segment := range map[string]string{gsm: fmt.Sprintf("10.%d.0.0/16", 20+2*round), baseGSM: fmt.Sprintf("10.%d.0.0/16", 21+2*round)} {
		if err := admin.Create(ctx, &paasv1.GroupSegmentMapping{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: paasv1.GroupSegmentMappingSpec{Segment: segment, KeepalivedGroup: "keepalived/" + name}}); err != nil {
			return r, err
		}
	}
	fmt.Printf("N=%d: building %d + %d legacy VirtualIPs (Service, VirtualIP, status, clone, ledger)...\n", n, n, n)
	restore, err := testenv.AllowVirtualIPCreation(ctx, admin)
	if err != nil {
		return r, err
	}
	build := func(ns, gsm string, ips []netip.Addr) error {
		return fanout.Run(16, n, func(i int) error {
			_, err := testenv.CreateLegacy(ctx, admin, operator, testenv.LegacyVIP{Namespace: ns, Name: fmt.Sprintf("vip-%d", i),
				Service: fmt.Sprintf("svc-%d", i), IP: ips[i].String(), GSM: gsm})
			return err
		})
	}
	if err := build(baseNS, baseGSM, baseIPs); err != nil {
		return r, err
	}
	if err := build(benchNS, gsm, benchIPs); err != nil {
		return r, err
	}
	if err := restore(); err != nil {
		return r, err
	}

	// Baseline, before the operator runs (it would serve or garbage-collect what
	// the baseline writes): the bare writes of a migration, nothing else.
	fmt.Printf("N=%d: baseline...\n", n)
	var vips paasv1.VirtualIPList
	if err := operator.List(ctx, &vips, client.InNamespace(baseNS)); err != nil {
		return r, err
	}
	start := time.Now()
	if err := admin.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: baseGSM},
		Spec: paasv1.IPGroupSpec{Segment: fmt.Sprintf("10.%d.0.0/16", 21+2*round), AutoAssign: ptr.To(false)}}); err != nil {
		return r, err
	}
	if err := fanout.Run(workers, n, func(i int) error { return baselineTakeOver(ctx, operator, &vips.Items[i], baseGSM) }); err != nil {
		return r, fmt.Errorf("baseline: %w", err)
	}
	time.Sleep(delay)
	if err := fanout.Run(workers, n, func(i int) error { return baselineCleanUp(ctx, operator, &vips.Items[i]) }); err != nil {
		return r, fmt.Errorf("baseline: %w", err)
	}
	r.baseline = time.Since(start)
	r.baseWrites = float64(1+7*n) / float64(n)
	// The baseline's Services and ledger go before the operator starts.
	var ledger paasv1.IPList
	if err := operator.List(ctx, &ledger, client.MatchingLabels{paasv1.IPGroupLabel: baseGSM}); err != nil {
		return r, err
	}
	if err := fanout.Run(16, len(ledger.Items), func(i int) error { return operator.Delete(ctx, &ledger.Items[i]) }); err != nil {
		return r, err
	}
	if err := admin.DeleteAllOf(ctx, &corev1.Service{}, client.InNamespace(baseNS)); err != nil {
		return r, err
	}

	// The IPGroup over the VirtualIPs' segment, announce.mode None (see the
	// package comment): what lets the hand-over go on without agents.
	if err := admin.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: gsm},
		Spec: paasv1.IPGroupSpec{Segment: fmt.Sprintf("10.%d.0.0/16", 20+2*round), AutoAssign: ptr.To(false),
			Announce: &paasv1.Announce{Mode: paasv1.AnnounceNone}}}); err != nil {
		return r, err
	}

	// The operator: a real process; the clock starts when the annotations go on.
	fmt.Printf("N=%d: operator...\n", n)
	op, err := operatorproc.Start(root, dir, "--metrics-bind-address", metricsAddr, "--metrics-secure=false", "--health-probe-bind-address", probeAddr,
		"--migration-workers", fmt.Sprint(workers), "--migration-cutover-delay", delay.String())
	if err != nil {
		return r, err
	}
	defer func() { _ = op.Process.Signal(syscall.SIGTERM); _ = op.Wait() }()
	if err := operatorproc.WaitReady(probeAddr, 60*time.Second); err != nil {
		return r, err
	}
	time.Sleep(2 * time.Second) // let its start-up writes settle before counting
	writesBefore, err := operatorproc.Writes(metricsAddr)
	if err != nil {
		return r, err
	}
	cfg, err := clientcmd.BuildConfigFromFlags("", filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return r, err
	}
	cfg.QPS, cfg.Burst = 200, 400
	start = time.Now()
	if err := cmd.MigrateAll(ctx, cfg, cmd.MigrateOptions{Namespace: benchNS, CutoverDelay: delay}, io.Discard); err != nil {
		return r, err
	}
	if err := waitMigrated(ctx, admin, benchNS, n, 10*time.Minute); err != nil {
		return r, err
	}
	r.operator = time.Since(start)
	time.Sleep(2 * time.Second) // trailing writes (Service status of the last loadBalancerIP clears)
	writesAfter, err := operatorproc.Writes(metricsAddr)
	if err != nil {
		return r, err
	}
	r.opWrites = (writesAfter - writesBefore) / float64(n)
	r.changed, r.doubled, r.wrong, err = checkIPs(ctx, admin, benchNS, benchIPs)
	return r, err
}

// baselineTakeOver is the first half of a migration by hand: the Service
// becomes a LoadBalancer asking for the IP, the ledger object is relabelled
// and owned by it, its status holds the IP.
func baselineTakeOver(ctx context.Context, c client.Client, vip *paasv1.VirtualIP, group string) error {
	svc := &corev1.Service{}
	if err := c.Get(ctx, client.ObjectKey{Namespace: vip.Namespace, Name: vip.Spec.Service}, svc); err != nil {
		return err
	}
	converted := svc.DeepCopy()
	converted.Spec.Type, converted.Spec.LoadBalancerIP = corev1.ServiceTypeLoadBalancer, vip.Status.IP
	// The operator's own class, as a migration writes it: the operator's
	// admission policy lets its identity make no other. These Services are
	// deleted before the operator starts.
	converted.Spec.LoadBalancerClass = ptr.To(paasv1.LoadBalancerClass)
	if err := c.Patch(ctx, converted, client.MergeFrom(svc), paasv1.FieldOwner); err != nil {
		return fmt.Errorf("convert Service: %w", err)
	}
	ip := &paasv1.IP{}
	if err := c.Get(ctx, client.ObjectKey{Name: vip.Status.IP}, ip); err != nil {
		return err
	}
	ip.Labels = map[string]string{paasv1.IPGroupLabel: group}
	ip.Annotations[paasv1.OwnerAnnotation] = svc.Namespace + "/" + svc.Name
	ip.Spec = paasv1.IPSpec{Address: vip.Status.IP, IPGroup: group, Owner: &paasv1.IPOwner{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}}
	if err := c.Update(ctx, ip, paasv1.FieldOwner); err != nil {
		return fmt.Errorf("relabel ledger: %w", err)
	}
	held := converted.DeepCopy()
	mode := corev1.LoadBalancerIPModeProxy
	held.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: vip.Status.IP, IPMode: &mode}}
	held.Status.Conditions = []metav1.Condition{{Type: paasv1.ConditionIPAllocated, Status: "True", Reason: paasv1.ReasonAllocated,
		Message: "holds " + vip.Status.IP + " from IPGroup " + group, LastTransitionTime: metav1.Now()}}
	return c.Status().Patch(ctx, held, client.MergeFrom(converted), paasv1.FieldOwner)
}

// baselineCleanUp is the second half: clone, loadBalancerIP, finalizers, state.
func baselineCleanUp(ctx context.Context, c client.Client, vip *paasv1.VirtualIP) error {
	clone := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: vip.Namespace, Name: vip.Status.ClonedService}}
	if err := c.Delete(ctx, clone); err != nil {
		return fmt.Errorf("delete clone: %w", err)
	}
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: vip.Namespace, Name: vip.Spec.Service}}
	if err := c.Patch(ctx, svc, client.RawPatch("application/merge-patch+json", []byte(`{"spec":{"loadBalancerIP":null}}`)), paasv1.FieldOwner); err != nil {
		return fmt.Errorf("clear loadBalancerIP: %w", err)
	}
	if err := c.Patch(ctx, vip, client.RawPatch("application/merge-patch+json", []byte(`{"metadata":{"finalizers":null}}`)), paasv1.FieldOwner); err != nil {
		return fmt.Errorf("remove finalizers: %w", err)
	}
	done := vip.DeepCopy()
	done.Status.State, done.Status.Message = paasv1.VirtualIPMigrated, "migrated"
	return c.Status().Patch(ctx, done, client.MergeFrom(vip), paasv1.FieldOwner)
}

func waitMigrated(ctx context.Context, c client.Client, ns string, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		var list paasv1.VirtualIPList
		if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
			return err
		}
		migrated := 0
		for _, v := range list.Items {
			if v.Status.State == paasv1.VirtualIPMigrated {
				migrated++
			}
		}
		if migrated == n {
			return nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("not all %d VirtualIPs Migrated after %s", n, timeout)
}

// checkIPs compares every Service's address to its VirtualIP's.
func checkIPs(ctx context.Context, c client.Client, ns string, ips []netip.Addr) (changed, doubled, wrong int, err error) {
	var list corev1.ServiceList
	if err := c.List(ctx, &list, client.InNamespace(ns)); err != nil {
		return 0, 0, 0, err
	}
	seen := map[string]bool{}
	for _, s := range list.Items {
		var i int
		if _, err := fmt.Sscanf(s.Name, "svc-%d", &i); err != nil || i >= len(ips) {
			wrong++ // a clone left behind
			continue
		}
		got := ""
		for _, in := range s.Status.LoadBalancer.Ingress {
			got += in.IP
		}
		if got != ips[i].String() {
			changed++
		}
		if seen[got] {
			doubled++
		}
		seen[got] = true
	}
	return changed, doubled, wrong, nil
}

func addrs(a, b byte, n int) []netip.Addr {
	var out []netip.Addr
	for i := range n {
		out = append(out, netip.AddrFrom4([4]byte{a, b, byte(1 + i/250), byte(1 + i%250)}))
	}
	return out
}
