// Command agent is 'make bench-agent': the node agent's whole path, from a change in the API
// to the element in the kernel, against kube-proxy in nftables mode (bin/k8s/kube-proxy, built
// from the same Kubernetes release as the control plane), each in a node network namespace of
// its own, both against one local control plane (hack/local-cluster.sh) holding N IPv6
// LoadBalancer Services x 2 ports x 5 endpoints (objects.go). In one run it measures, for each:
//
//   - cold start: from the program's start until every endpoint is in its node's kernel (each
//     starts alone, with the other one not yet running);
//   - one endpoint changed in the API (one EndpointSlice patch) until the kernel holds it: p50
//     and p99 over -changes changes, one every -gap (kube-proxy syncs at most once a second
//     by default: a gap above that is its best case), each timed on its own whether the
//     previous one arrived or not;
//   - -rate endpoint changes per second for -load: the CPU seconds each used meanwhile, and
//     its resident memory (at the end, and its peak over the run);
//
// and prints the ratios ours/kube-proxy. "In the kernel" is read from the kernel's own
// notifications (monitor.go), not from either program's word. Both run with their defaults.
package main

import (
	"context"
	"flag"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"

	"github.com/paas-org/vip-allocator-operator/bench/internal/operatorproc"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// The two node agents, in the order they cold-start.
const (
	kubeProxy = "kube-proxy"
	ours      = "vip-allocator"
	// agentPprof is our agent's pprof address, on its namespace's loopback.
	agentPprof = "127.0.0.1:18190"
)

type config struct {
	n, changes, rate int
	gap, load        time.Duration
	kubeProxyBin     string
	// patience is how long a change may take into a kernel before it counts as not there.
	patience time.Duration
	// profile: write our agent's CPU profile over the load phase there.
	profile string
}

func main() {
	var c config
	flag.IntVar(&c.n, "n", 10000, "Services (x 2 ports x 5 endpoints)")
	flag.IntVar(&c.changes, "changes", 200, "single endpoint changes timed one at a time")
	flag.DurationVar(&c.gap, "gap", 1100*time.Millisecond, "time between two timed changes")
	flag.IntVar(&c.rate, "rate", 50, "endpoint changes per second in the load phase")
	flag.DurationVar(&c.load, "load", time.Minute, "length of the load phase")
	flag.StringVar(&c.kubeProxyBin, "kube-proxy", "", "kube-proxy binary (default $KUBE_PROXY, else bin/k8s/kube-proxy: 'make controlplane' builds it)")
	flag.DurationVar(&c.patience, "patience", 3*time.Minute, "how long a change may take into a kernel: a slower one counts as longer than this in the percentiles")
	flag.StringVar(&c.profile, "profile", "", "write our agent's CPU profile over the load phase to this file ('go tool pprof -top bin/vip-allocator FILE')")
	flag.Parse()
	ctrllog.SetLogger(logr.Discard()) // the bench's clients log nothing worth reading here
	if os.Geteuid() != 0 {
		fmt.Fprintln(os.Stderr, "bench-agent: needs root (it makes network namespaces)")
		os.Exit(1)
	}
	root := testenv.RepoRoot()
	if c.kubeProxyBin == "" {
		c.kubeProxyBin = os.Getenv("KUBE_PROXY")
	}
	if c.kubeProxyBin == "" {
		c.kubeProxyBin = filepath.Join(root, "bin", "k8s", "kube-proxy")
	}
	if err := run(root, c); err != nil {
		fmt.Fprintln(os.Stderr, "bench-agent:", err)
		os.Exit(1)
	}
}

// figures are one agent's results.
type figures struct {
	cold      time.Duration
	latencies []time.Duration
	cpu       float64
	rss, hwm  float64
	// lost are the timed changes not in the kernel after timeChanges' patience.
	lost []string
	// loadBehind: the load's last change was not in the kernel after the patience either
	// (its CPU is then counted until that deadline).
	loadBehind bool
}

// pct is the p-th percentile of the change latencies, the lost ones counted as longer than
// any; ok is false when it falls among them.
func (f *figures) pct(p int) (d time.Duration, ok bool) {
	all := slices.Clone(f.latencies)
	slices.Sort(all)
	n := len(all) + len(f.lost)
	if n == 0 {
		return 0, true
	}
	i := max(0, (p*n+99)/100-1)
	if i >= len(all) {
		return 0, false
	}
	return all[i], true
}

func (f *figures) pctString(p int, patience time.Duration) string {
	d, ok := f.pct(p)
	if !ok {
		return "> " + patience.String()
	}
	return d.Round(100 * time.Microsecond).String()
}

func run(root string, c config) error {
	for _, b := range []string{c.kubeProxyBin, operatorproc.Binary(root)} {
		if _, err := os.Stat(b); err != nil {
			return fmt.Errorf("%s is missing: 'make controlplane build' builds kube-proxy and the agent", b)
		}
	}
	cluster, err := operatorproc.ClusterUp(root, 17643, 13579) // ports of its own: make test runs the benches' smokes at once
	if err != nil {
		return err
	}
	defer cluster.Down()
	dir, admin, operator := cluster.Dir, cluster.Admin, cluster.Operator
	// The agents' logs outlive the control plane's directory, for a run that failed.
	logs, err := os.MkdirTemp("", "bench-agent-logs")
	if err != nil {
		return err
	}
	fmt.Printf("logs of both agents: %s\n", logs)
	ctx := context.Background()
	nodeIPs := map[string]netip.Addr{kubeProxy: netip.MustParseAddr("2001:db8:ff::1"), ours: netip.MustParseAddr("2001:db8:ff::2")}
	start := time.Now()
	if err := populate(ctx, admin, operator, c.n, nodeIPs); err != nil {
		return err
	}
	fmt.Printf("cluster: %d Services x 2 ports x %d endpoints written in %s\n", c.n, endpoints, time.Since(start).Round(time.Millisecond))

	apiURL, err := apiHost(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return err
	}
	kubeconfig, err := nodeKubeconfig(dir)
	if err != nil {
		return err
	}
	nodes := map[string]*node{}
	monitors := map[string]*monitor{}
	defer func() {
		for _, m := range monitors {
			m.close()
		}
		for _, n := range nodes {
			n.destroy()
		}
	}()
	commands := map[string][]string{
		kubeProxy: {c.kubeProxyBin, "--kubeconfig", kubeconfig, "--proxy-mode", "nftables", "--hostname-override", kubeProxy,
			// The namespace is no whole node: leave the host's conntrack table size alone.
			"--conntrack-max-per-core", "0",
			"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256"},
		ours: {operatorproc.Binary(root), "agent", "--node-name", ours, "--kubeconfig", kubeconfig, "--dataplane", "nftables",
			"--metrics-bind-address", "0", "--health-probe-bind-address", "0", "--pprof-bind-address", agentPprof},
	}
	results := map[string]*figures{kubeProxy: {}, ours: {}}
	for _, name := range []string{kubeProxy, ours} {
		n, err := newNode(name, nodeIPs[name], apiURL)
		if err != nil {
			return err
		}
		nodes[name] = n
		m, err := newMonitor(n.ns)
		if err != nil {
			return err
		}
		monitors[name] = m
		all := m.expectAll(allEndpoints(c.n))
		start := time.Now()
		if err := n.start(logs, commands[name]...); err != nil {
			return err
		}
		if err := waitCold(n, m, all, start, results[name], c.n); err != nil {
			return err
		}
		fmt.Printf("%-14s cold start: every endpoint in the kernel after %s\n", name, results[name].cold.Round(time.Millisecond))
	}

	// Whatever either does after its cold start (kube-proxy cleans up and syncs again) must be
	// over before the changes are timed: they measure the steady state.
	settle := time.Now()
	for _, name := range []string{kubeProxy, ours} {
		for monitors[name].quietFor() < 10*time.Second && time.Since(settle) < 10*time.Minute {
			time.Sleep(time.Second)
		}
	}
	fmt.Printf("both kernels' rules unchanged for 10 s, %s after the last cold start\n", time.Since(settle).Round(time.Second))
	if err := timeChanges(ctx, admin, c, nodes, monitors, results); err != nil {
		return err
	}
	if err := load(ctx, admin, c, nodes, monitors, results); err != nil {
		return err
	}
	for name, m := range monitors {
		if err := m.trouble(); err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
	}
	report(c, results)
	return nil
}

// waitCold waits until every endpoint is in the node's kernel.
func waitCold(n *node, m *monitor, all <-chan time.Time, start time.Time, f *figures, services int) error {
	// kube-proxy at 10,000 Services takes minutes on a loaded machine; give both plenty.
	deadline := time.After(time.Duration(services/10+120) * time.Second)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	for {
		select {
		case t := <-all:
			f.cold = t.Sub(start)
			return nil
		case <-tick.C:
			if err := n.alive(); err != nil {
				return err
			}
			if err := m.trouble(); err != nil {
				return fmt.Errorf("%s cold start: %w", n.name, err)
			}
		case <-deadline:
			return fmt.Errorf("%s cold start: %d of %d endpoints still not in the kernel; the end of its log:\n%s", n.name, m.missing(), services*endpoints, tail(n.log, 20))
		}
	}
}

// changeCount numbers the new endpoint addresses, so every change's address is new.
var changeCount atomic.Uint32

// timeChanges makes one endpoint change every c.gap and times each into both kernels. It does
// not wait for one change to arrive before the next: a writer slower than the gap gets the
// changes in batches, as it would in a cluster, and its latencies say so.
func timeChanges(ctx context.Context, admin client.Client, c config, nodes map[string]*node, monitors map[string]*monitor, results map[string]*figures) error {
	rng := rand.New(rand.NewPCG(1, 2))
	var mu sync.Mutex
	var wg sync.WaitGroup
	patience := c.patience
	for k := 0; k < c.changes; k++ {
		i, e := rng.IntN(c.n), rng.IntN(endpoints)
		addr := addrAt(changeBase, 0, changeCount.Add(1))
		waits := map[string]<-chan time.Time{}
		for name, m := range monitors {
			waits[name] = m.expect(addr)
		}
		start := time.Now()
		if err := changeEndpoint(ctx, admin, i, e, addr); err != nil {
			return fmt.Errorf("change %d: %w", k, err)
		}
		for name, w := range waits {
			wg.Add(1)
			go func() {
				defer wg.Done()
				select {
				case t := <-w:
					mu.Lock()
					results[name].latencies = append(results[name].latencies, t.Sub(start))
					mu.Unlock()
				case <-time.After(patience):
					mu.Lock()
					results[name].lost = append(results[name].lost, fmt.Sprintf("change %d (endpoint %s of %s, made %s)", k, addr, svcName(i), start.Format("15:04:05.000")))
					mu.Unlock()
				}
			}()
		}
		time.Sleep(time.Until(start.Add(c.gap)))
	}
	wg.Wait()
	for name, n := range nodes {
		if err := n.alive(); err != nil {
			return err
		}
		if lost := results[name].lost; len(lost) > 0 {
			fmt.Printf("%s: %d of %d changes not in the kernel after %s (monitor: %v): %s\n", name, len(lost), c.changes, patience, monitors[name].trouble(), strings.Join(lost, "; "))
		}
	}
	for _, name := range []string{kubeProxy, ours} {
		f := results[name]
		fmt.Printf("%-14s one endpoint change -> kernel: p50 %s, p99 %s (%d changes, %d slower than %s)\n", name,
			f.pctString(50, patience), f.pctString(99, patience), c.changes, len(f.lost), patience)
	}
	// Ours must carry every change; kube-proxy's slow ones are reported, they are its figure.
	if len(results[ours].lost) > 0 {
		return fmt.Errorf("our agent lost %d changes; the end of its log:\n%s", len(results[ours].lost), tail(nodes[ours].log, 30))
	}
	return nil
}

// load makes c.rate endpoint changes a second for c.load and measures each agent's CPU time
// over it, until the last change is in its kernel, and its memory at the end.
func load(ctx context.Context, admin client.Client, c config, nodes map[string]*node, monitors map[string]*monitor, results map[string]*figures) error {
	cpu0 := map[string]float64{}
	for name, n := range nodes {
		cpu0[name] = n.cpu()
	}
	total := int(c.load.Seconds() * float64(c.rate))
	var profiled chan error
	if c.profile != "" {
		profiled = make(chan error, 1)
		go func() {
			url := fmt.Sprintf("http://%s/debug/pprof/profile?seconds=%d", agentPprof, int(c.load.Seconds()))
			out, err := exec.Command("ip", "netns", "exec", nodes[ours].ns, "curl", "-sSfo", c.profile, url).CombinedOutput()
			if err != nil {
				err = fmt.Errorf("CPU profile: %w: %s", err, out)
			}
			profiled <- err
		}()
	}
	rng := rand.New(rand.NewPCG(3, 4))
	tick := time.NewTicker(time.Second / time.Duration(c.rate))
	defer tick.Stop()
	var wg sync.WaitGroup
	var failed atomic.Int32
	start := time.Now()
	for k := 0; k < total; k++ {
		<-tick.C
		i, e := rng.IntN(c.n), rng.IntN(endpoints)
		addr := addrAt(changeBase, 1, changeCount.Add(1))
		wg.Add(1)
		go func() { // the API's round trip must not slow the rate down
			defer wg.Done()
			if err := changeEndpoint(ctx, admin, i, e, addr); err != nil {
				failed.Add(1)
			}
		}()
	}
	wg.Wait()
	sent := time.Since(start)
	if f := failed.Load(); f > 0 {
		return fmt.Errorf("load: %d of %d changes failed", f, total)
	}
	// A final change, after all others: when it is in a kernel, so is everything before it.
	marker := addrAt(changeBase, 2, changeCount.Add(1))
	waits := map[string]<-chan time.Time{}
	for name, m := range monitors {
		waits[name] = m.expect(marker)
	}
	if err := changeEndpoint(ctx, admin, 0, 0, marker); err != nil {
		return err
	}
	deadline := time.After(c.patience)
	for _, name := range []string{ours, kubeProxy} {
		select {
		case <-waits[name]:
		case <-deadline:
			if name == ours {
				return fmt.Errorf("%s: the load's last change not in the kernel after %s", name, c.patience)
			}
			results[name].loadBehind = true
		}
		results[name].cpu = nodes[name].cpu() - cpu0[name]
		results[name].rss, results[name].hwm = nodes[name].mem()
		if err := nodes[name].alive(); err != nil {
			return err
		}
	}
	fmt.Printf("load: %d endpoint changes in %s (%.1f/s)\n", total, sent.Round(time.Millisecond), float64(total)/sent.Seconds())
	if profiled != nil {
		if err := <-profiled; err != nil {
			return err
		}
		fmt.Printf("our agent's CPU profile over the load: %s\n", c.profile)
	}
	return nil
}

func report(c config, results map[string]*figures) {
	kp, us := results[kubeProxy], results[ours]
	fmt.Printf("\nbench-agent: %d Services x 2 ports x %d endpoints (IPv6), kube-proxy --proxy-mode nftables vs vip-allocator agent --dataplane nftables\n", c.n, endpoints)
	fmt.Printf("%-44s %14s %14s %18s\n", "figure", kubeProxy, ours, "ratio ours/kube-proxy")
	row := func(what string, k, o float64, unit string) {
		ratio := "-"
		if k > 0 {
			ratio = fmt.Sprintf("%.2f", o/k)
		}
		fmt.Printf("%-44s %14s %14s %18s\n", what, fmt.Sprintf("%.3f %s", k, unit), fmt.Sprintf("%.3f %s", o, unit), ratio)
	}
	row("cold start, until every endpoint is in", kp.cold.Seconds(), us.cold.Seconds(), "s")
	for _, p := range []int{50, 99} {
		k, kok := kp.pct(p)
		o, _ := us.pct(p)
		what := fmt.Sprintf("one endpoint change -> kernel, p%d (%d)", p, c.changes)
		if !kok {
			fmt.Printf("%-44s %14s %14s %18s\n", what, "> "+c.patience.String(), fmt.Sprintf("%.3f ms", ms(o)), fmt.Sprintf("< %.4f", ms(o)/ms(c.patience)))
			continue
		}
		row(what, ms(k), ms(o), "ms")
	}
	cpuWhat := fmt.Sprintf("%d changes/s for %s: CPU", c.rate, c.load)
	if kp.loadBehind {
		cpuWhat += " (kube-proxy: until " + c.patience.String() + " after, still behind)"
	}
	row(cpuWhat, kp.cpu, us.cpu, "s")
	row("RSS at the end of the load", kp.rss, us.rss, "MiB")
	row("peak RSS over the run", kp.hwm, us.hwm, "MiB")
	fmt.Printf("%-44s %14d %14d\n", "timed changes slower than "+c.patience.String(), len(kp.lost), len(us.lost))
	var verdict []string
	for _, v := range []struct {
		what string
		k, o float64
	}{{"cold start", kp.cold.Seconds(), us.cold.Seconds()}, {"p50", pctMS(kp, 50, c.patience), pctMS(us, 50, c.patience)},
		{"p99", pctMS(kp, 99, c.patience), pctMS(us, 99, c.patience)}, {"CPU", kp.cpu, us.cpu}, {"RSS", kp.rss, us.rss}} {
		if v.o > v.k {
			verdict = append(verdict, v.what)
		}
	}
	if len(verdict) == 0 {
		fmt.Println("target (ours at or below kube-proxy on each figure): met")
	} else {
		fmt.Printf("target (ours at or below kube-proxy on each figure): NOT met on %s\n", strings.Join(verdict, ", "))
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pctMS is f's p-th percentile in ms, a lost one counted as twice the patience.
func pctMS(f *figures, p int, patience time.Duration) float64 {
	if d, ok := f.pct(p); ok {
		return ms(d)
	}
	return ms(2 * patience)
}

// apiHost is the API server's host:port on the root namespace's loopback.
func apiHost(kubeconfig string) (string, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return "", err
	}
	u, err := url.Parse(cfg.Host)
	if err != nil {
		return "", err
	}
	return u.Host, nil
}

// nodeKubeconfig is the admin kubeconfig pointed at the node namespaces' forwarder. Both
// agents use the same identity, so neither waits on the API server's fairness more.
func nodeKubeconfig(dir string) (string, error) {
	data, err := os.ReadFile(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return "", err
	}
	host, err := apiHost(filepath.Join(dir, "kubeconfig"))
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "node.kubeconfig")
	return path, os.WriteFile(path, []byte(strings.ReplaceAll(string(data), host, "127.0.0.1:6443")), 0o600)
}
