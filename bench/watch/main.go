// Command watch is 'make bench-watch': what one node agent's watches cost the
// API server in a large cluster, against kube-proxy's, which runs on every
// node too. On one local control plane (test/testenv) it creates N Nodes as
// kubelets write them (50 images, conditions, the agent's interfaces
// annotation) and S LoadBalancer Services, starts, each on its own counted
// connections,
//
//   - the agent's informer set as it ships (Services, EndpointSlices, the
//     ledger, IPGroups, BGPPeers, its own Node only and every NodeView, which
//     each node's agent writes and which a status report does not change);
//   - kube-proxy's (Services, EndpointSlices, its own Node only; protobuf);
//   - the agent's before NodeViews (every Node in full), and that with the
//     Nodes watched as metadata only (the cut measured first);
//
// then reports every Node's status as the kubelet does (once per
// -report-period; the kubelet's nodeStatusReportFrequency, 5 minutes, when
// nothing changes; its 10 s heartbeat renews a Lease, which neither watches)
// for -duration, and prints what each received: bytes (what the API server
// wrote on the connection) and events, per second, and multiplied by N, the
// API server's output when every node runs one.
//
// Meanwhile, as in a rolling upgrade, half the Nodes have no NodeView (old
// agents) and one upgraded agent reads theirs straight from the API server
// (nodeagent's fallback, on its own counted connection); the bench prints
// what that costs, multiplied out over the agents at the worst point of an
// upgrade, and the API server's and etcd's CPU for -gets GETs of a Node served
// from the watch cache against as many quorum reads.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

func main() {
	nodes := flag.Int("nodes", 2000, "Node objects")
	services := flag.Int("services", 10000, "LoadBalancer Services")
	duration := flag.Duration("duration", time.Minute, "how long the Nodes report their status while the watches are counted")
	period := flag.Duration("report-period", 5*time.Minute, "how often each Node reports its status (the kubelet's nodeStatusReportFrequency)")
	gets := flag.Int("gets", 2000, "GETs of a Node each way when measuring what one costs the API server")
	flag.Parse()
	ctrl.SetLogger(logr.Discard())
	if err := run(*nodes, *services, *duration, *period, *gets); err != nil {
		fmt.Fprintln(os.Stderr, "bench-watch:", err)
		os.Exit(1)
	}
}

func run(nodes, services int, duration, period time.Duration, gets int) error {
	env, err := testenv.Start()
	if err != nil {
		return err
	}
	defer env.Stop()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	c := env.Admin

	start := time.Now()
	if err := c.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: "bench"}}); err != nil {
		return err
	}
	if err := createNodes(ctx, c, nodes); err != nil {
		return err
	}
	if err := createServices(ctx, c, "bench", services); err != nil {
		return err
	}
	var one corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: nodeName(0)}, &one); err != nil {
		return err
	}
	var view paasv1.NodeView
	if err := c.Get(ctx, client.ObjectKey{Name: nodeName(0)}, &view); err != nil {
		return err
	}
	size, _ := json.Marshal(&one)
	viewSize, _ := json.Marshal(&view)
	fmt.Printf("\nwatch traffic, %d Nodes (one Node: %.1f KiB of JSON, its NodeView %.1f KiB), %d Services, created in %s\n",
		nodes, float64(len(size))/1024, float64(len(viewSize))/1024, services, time.Since(start).Round(time.Second))

	watchers := []*watcher{
		agentWatcher("agent, as shipped (own Node + NodeViews)", env.AdminConfig, ownNodeAndViews, nodeName(0)),
		kubeProxyWatcher(env.AdminConfig, nodeName(0)),
		agentWatcher("agent before NodeViews (every Node)", env.AdminConfig, everyNode, ""),
		agentWatcher("agent before, Nodes as metadata only", env.AdminConfig, everyNodeMetadata, ""),
	}
	fmt.Printf("  initial lists (a cold start):\n")
	for _, w := range watchers {
		t := time.Now()
		if err := w.start(ctx); err != nil {
			return fmt.Errorf("%s: %w", w.name, err)
		}
		took := time.Since(t)
		time.Sleep(time.Second) // the handlers see the listed objects after the sync
		fmt.Printf("    %-42s %8.1f MiB, %6d objects, synced in %s\n", w.name, mib(w.bytes.Load()), w.events.Load(), took.Round(time.Millisecond))
	}
	old, err := oldAgents(ctx, c, watchers[0].cache, nodes)
	if err != nil {
		return err
	}
	for _, w := range watchers {
		w.bytes.Store(0)
		w.events.Store(0)
	}

	upgrade := make(chan error, 1)
	var fb *fallback
	go func() {
		window, stop := context.WithTimeout(ctx, duration)
		defer stop()
		var err error
		fb, err = runFallback(window, env.AdminConfig, watchers[0].cache, nodes)
		upgrade <- err
	}()
	reports, lag := reportStatuses(ctx, c, nodes, duration, period)
	time.Sleep(time.Second) // the last events to arrive
	if err := <-upgrade; err != nil {
		return fmt.Errorf("upgraded agent's fallback: %w", err)
	}
	secs := duration.Seconds()
	fmt.Printf("  %d status reports in %s (every Node once per %s: %.1f/s; the reports lagged at most %s)\n",
		reports, duration, period, float64(nodes)/period.Seconds(), lag.Round(time.Millisecond))
	fmt.Printf("  %-42s %14s %10s   %s\n", "received by one watcher", "bytes/s", "events/s", fmt.Sprintf("× %d nodes: the API server sends", nodes))
	var base float64
	for i, w := range watchers {
		b, e := float64(w.bytes.Load())/secs, float64(w.events.Load())/secs
		fmt.Printf("  %-42s %10.1f KiB %10.1f   %8.1f MiB/s, %9.0f events/s\n", w.name, b/1024, e, b*float64(nodes)/(1<<20), e*float64(nodes))
		if i == 1 {
			base = b
		}
	}
	if base > 0 {
		fmt.Printf("  ratio agent/kube-proxy (bytes/s): as shipped %.2f, before NodeViews %.1f, before with metadata-only Nodes %.1f\n",
			float64(watchers[0].bytes.Load())/secs/base, float64(watchers[2].bytes.Load())/secs/base, float64(watchers[3].bytes.Load())/secs/base)
	} else {
		fmt.Printf("  kube-proxy received nothing in the window (its own Node did not report); ratios need a longer -duration\n")
	}
	printUpgrade(fb, nodes, old, secs, float64(watchers[2].bytes.Load())/secs*float64(nodes))
	return getCost(ctx, env.AdminConfig, nodes, gets)
}

// reportStatuses has every Node report its status once per period, spread
// evenly, for duration; it returns how many reports were made and how late
// the latest one was against its schedule (the client keeping up).
func reportStatuses(ctx context.Context, c client.Client, nodes int, duration, period time.Duration) (int, time.Duration) {
	every := period / time.Duration(nodes)
	n := int(duration / every)
	start := time.Now()
	var lag atomic.Int64
	_ = fanout.Run(16, n, func(k int) error {
		due := start.Add(time.Duration(k) * every)
		if d := time.Until(due); d > 0 {
			time.Sleep(d)
		} else if int64(-d) > lag.Load() {
			lag.Store(int64(-d))
		}
		if err := reportStatus(ctx, c, k%nodes, time.Now()); err != nil {
			fmt.Fprintln(os.Stderr, err)
		}
		return nil
	})
	if left := time.Until(start.Add(duration)); left > 0 {
		time.Sleep(left)
	}
	return n, time.Duration(lag.Load())
}

func mib(b int64) float64 { return float64(b) / (1 << 20) }
