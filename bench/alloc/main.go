// Command alloc is 'make bench-alloc': on the local control plane
// (hack/local-cluster.sh), it measures
//
//   - the baseline, the API server's limit: a plain client with no client-side
//     rate limit doing exactly the operator's API writes per Service (ledger
//     create + status patch), 32 at once;
//   - the operator (bin/vip-allocator, a real process, with its default flags
//     unless -operator-args says otherwise): time from its start until N
//     pending Services all hold IPs, Services/s, and the ratio to the baseline;
//   - where the operator's reconciles wait (-waits): its goroutines sampled
//     through pprof during the allocation, each worker classed by what it is
//     blocked in (an API round trip, the client rate limiter, the allocator's
//     lock, an empty work queue);
//   - restart: SIGKILL, start again, time until ready (rebuild done), and how many
//     Services changed IP (must be 0) or share one;
//   - relocation: the IPGroup's segment moves, time until all N Services moved
//     (relocate.go), against a plain client making the same three writes per move;
//   - the operator's resident memory at the end;
//   - sharing (sharing.go): 3T Services in T sharing triples, time until all
//     hold an address against the same writes from a plain client, 0 addresses
//     held by two keys, 0 changed across a SIGKILL restart.
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/bench/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/bench/internal/operatorproc"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/internal/procmem"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

const (
	benchNS     = "bench"
	baselineNS  = "baseline"
	probeAddr   = "127.0.0.1:18181"
	pprofAddr   = "127.0.0.1:18182"
	metricsAddr = "127.0.0.1:18183"
)

func main() {
	n := flag.Int("n", 3000, "pending LoadBalancer Services")
	workers := flag.Int("baseline-workers", 32, "the baseline's concurrent writers")
	opArgs := flag.String("operator-args", "", "flags added to the operator's, separated by spaces (e.g. \"--workers 8 --kube-api-qps 200\" for an older default)")
	waits := flag.Bool("waits", false, "sample the operator's goroutines during the allocation and tell where its workers wait (costs the operator about 0.5 ms of CPU per Service, which the ratio then pays)")
	triples := flag.Int("share-triples", -1, "sharing triples of the sharing case (3 Services each); -1: n/3, 0: no sharing case")
	nRounds := flag.Int("rounds", 3, "times the operator and the baseline are measured one after the other; the verdict is the median ratio")
	flag.Parse()
	if *triples < 0 {
		*triples = *n / 3
	}
	if err := run(*n, *workers, strings.Fields(*opArgs), *waits, *triples, max(*nRounds, 1)); err != nil {
		fmt.Fprintln(os.Stderr, "bench-alloc:", err)
		os.Exit(1)
	}
}

func run(n, workers int, opArgs []string, waits bool, triples, nRounds int) error {
	root := testenv.RepoRoot()
	cluster, err := operatorproc.ClusterUp(root, 17443, 13379)
	if err != nil {
		return err
	}
	defer cluster.Down()
	dir, admin := cluster.Dir, cluster.Admin
	// The baseline writes as the operator (its ServiceAccount: the same RBAC and
	// API priority-and-fairness level) with no client-side limit: what the API
	// server allows is the limit measured.
	operator := cluster.Operator
	adminCS, err := protobufClientset(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return err
	}
	// Cancelled before the control plane stops (defers run last first), so
	// the watches end quietly instead of retrying a stopped API server.
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for _, ns := range []string{benchNS, baselineNS} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return err
		}
	}
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bench"}, Spec: paasv1.IPGroupSpec{Segment: "10.200.0.0/16"}}
	if err := admin.Create(ctx, group); err != nil {
		return err
	}
	fmt.Printf("creating %d + %d pending LoadBalancer Services...\n", n, n)
	if err := fanout.Run(16, n, func(i int) error {
		return admin.Create(ctx, service(baselineNS, i, ptr.To("bench.example/baseline")))
	}); err != nil {
		return err
	}
	if err := fanout.Run(16, n, func(i int) error { return admin.Create(ctx, service(benchNS, i, nil)) }); err != nil {
		return err
	}

	// Both phases are observed the same way (a watch on their namespace), so
	// the observer costs the API server the same in each.
	baseWatch, err := watchIPs(ctx, adminCS, baselineNS, n)
	if err != nil {
		return err
	}
	watch, err := watchIPs(ctx, adminCS, benchNS, n)
	if err != nil {
		return err
	}

	// Baseline: the operator's two writes per Service, nothing else. The
	// Services are read beforehand, as the operator reads them from its cache.
	var pending corev1.ServiceList
	if err := operator.List(ctx, &pending, client.InNamespace(baselineNS)); err != nil {
		return err
	}
	cpu := newControlPlaneCPU(dir)
	baseCPUFrom := cpu.read()
	baseAPIFrom, err := readAPICounts(ctx, adminCS)
	if err != nil {
		return err
	}
	baseline, err := timeBaseline(ctx, operator, pending.Items, baseWatch, workers)
	if err != nil {
		return err
	}
	baseCPU := cpu.since(baseCPUFrom)
	baseAPI, err := readAPICounts(ctx, adminCS)
	if err != nil {
		return err
	}
	start := time.Now()
	if err := fanout.Run(workers, n, func(i int) error { return baselineMove(ctx, operator, &pending.Items[i], i) }); err != nil {
		return fmt.Errorf("baseline moves: %w", err)
	}
	if err := baseWatch.waitAllIn(baselineTo, n, 5*time.Minute); err != nil {
		return fmt.Errorf("baseline moves: %w", err)
	}
	baselineRelocation := time.Since(start)

	// The baseline's objects go before the operator starts, so it sees exactly
	// N pending Services (it would otherwise garbage-collect the baseline's ledger).
	if err := clearNamespace(ctx, admin, operator, baselineNS, n, workers); err != nil {
		return err
	}

	// The operator, from process start until every Service holds an IP.
	start = time.Now()
	opStart := start
	opCPUFrom := cpu.read()
	opAPIFrom, err := readAPICounts(ctx, adminCS)
	if err != nil {
		return err
	}
	op, err := startOperator(root, dir, opArgs)
	if err != nil {
		return err
	}
	if addr := os.Getenv("PPROF"); addr != "" {
		go func() {
			// Over the allocation only: it lasts about 12 s on an idle machine, and
			// the restart that follows kills the operator, and the profile with it.
			time.Sleep(2 * time.Second)
			_ = exec.Command("curl", "-so", "/tmp/vip-allocator-allocs-start.pprof", "http://"+addr+"/debug/pprof/allocs").Run()
			_ = exec.Command("curl", "-so", "/tmp/vip-allocator-cpu.pprof", "http://"+addr+"/debug/pprof/profile?seconds=8").Run()
			_ = exec.Command("curl", "-so", "/tmp/vip-allocator-allocs-end.pprof", "http://"+addr+"/debug/pprof/allocs").Run()
		}()
	}
	var sampled *waitSamples
	if waits {
		sampled = sampleWaits(operatorPprof(), watch.allServed)
	}
	<-watch.allServed
	allocation := time.Since(start)
	opCPU := procmem.CPU(op.Process.Pid, false)
	opPhaseCPU := cpu.since(opCPUFrom)
	opAPI, err := readAPICounts(ctx, adminCS)
	if err != nil {
		return err
	}
	opWrites, err := operatorproc.Writes(metricsAddr)
	if err != nil {
		return fmt.Errorf("operator metrics: %w", err)
	}
	firstIP := watch.firstServed.Sub(opStart)
	workersAt := operatorproc.LoggedAt(dir, "service", "Starting workers")
	before := watch.snapshot()

	// Restart: SIGKILL, (the second baseline while it is down), start again,
	// wait for readiness (the allocator rebuilt).
	_ = op.Process.Signal(syscall.SIGKILL)
	_ = op.Wait()
	baseline2, err := baselineAgain(ctx, admin, operator, adminCS, "baseline-again", n, workers)
	if err != nil {
		return err
	}
	start = time.Now()
	if op, err = startOperator(root, dir, opArgs); err != nil {
		return err
	}
	if err := waitReady(60 * time.Second); err != nil {
		return err
	}
	restart := time.Since(start)
	time.Sleep(5 * time.Second) // let it reconcile every Service once more
	after := watch.snapshot()
	changed, doubled := compare(before, after)
	rss, hwm := procmem.Read(fmt.Sprint(op.Process.Pid))
	anon, file := procmem.Split(fmt.Sprint(op.Process.Pid))
	if addr := os.Getenv("PPROF"); addr != "" {
		_ = exec.Command("curl", "-so", "/tmp/vip-allocator-heap.pprof", "http://"+addr+"/debug/pprof/heap").Run()
	}
	relocation, err := relocate(ctx, admin, watch, n)
	if err != nil {
		return err
	}
	time.Sleep(2 * time.Second) // a late second move or a doubled IP would show by now
	_, relocDoubled := compare(after, watch.snapshot())
	relocRSS, relocHWM := procmem.Read(fmt.Sprint(op.Process.Pid))
	stopOperator(op)

	// More rounds, from nothing allocated.
	if err := clearNamespace(ctx, admin, operator, benchNS, n, workers); err != nil {
		return err
	}
	measured := &rounds{root: root, dir: dir, opArgs: opArgs, admin: admin, writer: operator, cs: adminCS, n: n, workers: workers}
	measured.add(allocation, baseline, baseline2)
	if err := measured.more(ctx, nRounds-1, baseline2); err != nil {
		return fmt.Errorf("rounds: %w", err)
	}

	baseRate1, baseRate2 := float64(n)/baseline.Seconds(), float64(n)/baseline2.Seconds()
	baseRate := (baseRate1 + baseRate2) / 2
	opRate := float64(n) / allocation.Seconds()
	fmt.Printf("\nbench-alloc: N=%d Services, /16 IPGroup, local kube-apiserver %s, operator flags: %s\n", n, "v1.36.3", cmp.Or(strings.Join(opArgs, " "), "(defaults)"))
	fmt.Printf("  baseline: API server limit, 2 writes/Service, %2d workers, no client limit: %.2fs, %.0f Services/s before the operator; %.2fs, %.0f Services/s after it; mean %.0f Services/s\n",
		workers, baseline.Seconds(), baseRate1, baseline2.Seconds(), baseRate2, baseRate)
	fmt.Printf("  operator (process start -> all N hold an IP):          %8.2fs  %7.0f Services/s  (%.1f CPU-s)\n", allocation.Seconds(), opRate, opCPU)
	fmt.Printf("  operator start -> first Service holds an IP:           %8.2fs\n", firstIP.Seconds())
	if !workersAt.IsZero() {
		fmt.Printf("    of which start -> its Service workers start (caches synced): %.2fs\n", workersAt.Sub(opStart).Seconds())
	}
	steady := float64(n-1) / (allocation - firstIP).Seconds()
	fmt.Printf("  operator from its first IP until all N (start-up cost excluded): %6.0f Services/s, ratio %.2f\n", steady, steady/baseRate)
	fmt.Printf("  API writes per Service (baseline 2), Events included:  %8.2f\n", opWrites/float64(n))
	fmt.Printf("  CPU, baseline (before):  %s (the writer: this bench's workers and watch)\n", baseCPU.perService(n, baseCPU.self))
	fmt.Printf("  CPU, operator:           %s\n", opPhaseCPU.perService(n, opCPU))
	fmt.Printf("  the API server's requests and watch events per Service, baseline:%s\n", baseAPI.perService(baseAPIFrom, n))
	fmt.Printf("  the same, operator:%s\n", opAPI.perService(opAPIFrom, n))
	fmt.Printf("  ratio operator/baseline (mean), the first round:       %8.2f   (%.2f to %.2f against either)\n", opRate/baseRate, opRate/max(baseRate1, baseRate2), opRate/min(baseRate1, baseRate2))
	fmt.Printf("  ratio, the median of %d rounds (each against the baselines either side): %s   (target >= 0.8)\n", len(measured.ratios), measured)
	if sampled != nil {
		fmt.Printf("  the operator's Service workers during the allocation: %s\n", sampled)
	}
	fmt.Printf("  restart after SIGKILL -> ready (rebuilt):              %8.2fs\n", restart.Seconds())
	fmt.Printf("  IPs changed across the restart:                        %8d   (target 0)\n", changed)
	fmt.Printf("  IPs held by two Services:                              %8d   (target 0)\n", doubled)
	baseMoveRate, moveRate := float64(n)/baselineRelocation.Seconds(), float64(n)/relocation.Seconds()
	fmt.Printf("  relocation baseline (3 writes per move, no client limit):%8.2fs  %7.0f moves/s\n", baselineRelocation.Seconds(), baseMoveRate)
	fmt.Printf("  relocation (segment edit -> all N moved):              %8.2fs  %7.0f moves/s\n", relocation.Seconds(), moveRate)
	fmt.Printf("  ratio relocation/baseline:                             %8.2f\n", moveRate/baseMoveRate)
	fmt.Printf("  IPs held by two Services after the relocation:         %8d   (target 0)\n", relocDoubled)
	fmt.Printf("  operator RSS at the end / peak:                        %5.1f MiB / %.1f MiB (target < 100 MiB; at the end %.0f MiB anonymous, %.0f MiB of the binary)\n", rss, hwm, anon, file)
	fmt.Printf("  operator RSS after the relocation / peak:              %5.1f MiB / %.1f MiB\n", relocRSS, relocHWM)
	var shared sharingResult
	if triples > 0 {
		if shared, err = runSharing(ctx, root, dir, opArgs, admin, operator, adminCS, triples, workers); err != nil {
			return fmt.Errorf("sharing case: %w", err)
		}
		shared.print(triples)
	}
	if changed > 0 || doubled > 0 || relocDoubled > 0 {
		return fmt.Errorf("%d IPs changed, %d doubled, %d doubled after the relocation", changed, doubled, relocDoubled)
	}
	if shared.changed > 0 || shared.twoKeys > 0 || shared.split > 0 {
		return fmt.Errorf("sharing case: %d IPs changed, %d held by two keys, %d keys split", shared.changed, shared.twoKeys, shared.split)
	}
	return nil
}

// protobufClientset is a typed clientset of kubeconfig speaking protobuf,
// with no client-side limit, for the bulk creations.
func protobufClientset(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := operatorproc.UnlimitedConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	return kubernetes.NewForConfig(cfg)
}

func service(ns string, i int, class *string) *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("svc-%d", i)},
		Spec: corev1.ServiceSpec{
			Type:              corev1.ServiceTypeLoadBalancer,
			LoadBalancerClass: class,
			// The agent forwards VIP traffic to endpoints itself; no NodePorts are
			// needed, and 2 x N would not fit the default NodePort range.
			AllocateLoadBalancerNodePorts: ptr.To(false),
			Selector:                      map[string]string{"app": "bench"},
			Ports:                         []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

// baselineWrites makes, for Service i, the two writes the operator makes.
func baselineWrites(ctx context.Context, c client.Client, svc *corev1.Service, i int) error {
	addr := netip.AddrFrom4([4]byte{10, 201, byte(i >> 8), byte(i)})
	ip := ledger.Object(svc, addr, "bench")
	if err := c.Create(ctx, ip, paasv1.FieldOwner); err != nil {
		return err
	}
	return patchServed(ctx, c, svc, addr)
}

// patchServed is the operator's status patch of svc holding addr.
func patchServed(ctx context.Context, c client.Client, svc *corev1.Service, addr netip.Addr) error {
	patched := svc.DeepCopy()
	mode := corev1.LoadBalancerIPModeProxy
	patched.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr.String(), IPMode: &mode}}
	patched.Status.Conditions = []metav1.Condition{{Type: paasv1.ConditionIPAllocated, Status: "True",
		Reason: paasv1.ReasonAllocated, Message: "holds " + addr.String() + " from IPGroup bench", LastTransitionTime: metav1.Now()}}
	return c.Status().Patch(ctx, patched, client.MergeFrom(svc), paasv1.FieldOwner)
}

func startOperator(root, dir string, extra []string) (*exec.Cmd, error) {
	return operatorproc.Start(root, dir, append([]string{"--metrics-bind-address", metricsAddr, "--metrics-secure=false", "--health-probe-bind-address", probeAddr,
		"--pprof-bind-address", operatorPprof()}, extra...)...)
}

func waitReady(timeout time.Duration) error { return operatorproc.WaitReady(probeAddr, timeout) }

// ipWatch follows the bench namespace's Services with a watch, so measuring
// costs the API server no repeated lists.
type ipWatch struct {
	mu          sync.Mutex
	ips         map[string]string
	firstServed time.Time
	allServed   chan struct{}
}

func watchIPs(ctx context.Context, cs *kubernetes.Clientset, ns string, n int) (*ipWatch, error) {
	w := &ipWatch{ips: map[string]string{}, allServed: make(chan struct{})}
	list, err := cs.CoreV1().Services(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, err
	}
	// A retry watcher: the API server ends a watch now and then (and sooner under load), and a
	// plain one would leave the bench waiting forever for Services it was never told about.
	events, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, opts metav1.ListOptions) (watch.Interface, error) {
			return cs.CoreV1().Services(ns).Watch(ctx, opts)
		},
	})
	if err != nil {
		return nil, err
	}
	go func() {
		closed := false
		for ev := range events.ResultChan() {
			svc, ok := ev.Object.(*corev1.Service)
			if !ok {
				continue
			}
			var ips []string
			for _, in := range svc.Status.LoadBalancer.Ingress {
				ips = append(ips, in.IP)
			}
			w.mu.Lock()
			if len(ips) > 0 {
				if len(w.ips) == 0 {
					w.firstServed = time.Now()
				}
				w.ips[svc.Name] = strings.Join(ips, ",")
			}
			if !closed && len(w.ips) == n {
				close(w.allServed)
				closed = true
			}
			w.mu.Unlock()
		}
	}()
	return w, nil
}

func (w *ipWatch) snapshot() map[string]string {
	w.mu.Lock()
	defer w.mu.Unlock()
	out := make(map[string]string, len(w.ips))
	for k, v := range w.ips {
		out[k] = v
	}
	return out
}

func compare(before, after map[string]string) (changed, doubled int) {
	for name, ip := range before {
		if after[name] != ip {
			changed++
		}
	}
	seen := map[string]bool{}
	for _, ip := range after {
		if seen[ip] {
			doubled++
		}
		seen[ip] = true
	}
	return changed, doubled
}
