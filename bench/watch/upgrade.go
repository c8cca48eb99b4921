package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/internal/procmem"
	agentnodes "github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
)

// A rolling upgrade while the operator is down: the agents not upgraded yet
// publish no NodeView, nor does the operator (controllers/nodeview),
// and every upgraded agent reads their Nodes straight from the API server
// (nodeagent/nodes' Unviewed). The bench removes the views of the odd Nodes
// (half the cluster on old agents) and runs one upgraded agent's listing on
// its own counted connection for the measured window.

// oldAgents removes the NodeViews of the odd Nodes, as if their agents were
// not upgraded yet, and waits until the agent's cache, c, has seen it.
func oldAgents(ctx context.Context, admin client.Client, c client.Reader, nodes int) (int, error) {
	old := nodes / 2
	if err := fanout.Run(32, old, func(i int) error {
		v := &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: nodeName(2*i + 1)}}
		if err := admin.Delete(ctx, v); err != nil {
			return fmt.Errorf("delete NodeView %s: %w", v.Name, err)
		}
		return nil
	}); err != nil {
		return 0, err
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(100 * time.Millisecond) {
		var views paasv1.NodeViewList
		if err := c.List(ctx, &views); err != nil {
			return 0, err
		}
		if len(views.Items) == nodes-old {
			return old, nil
		}
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the agent's cache holds %d NodeViews, want %d", len(views.Items), nodes-old)
		}
	}
}

// fallback is one upgraded agent's reads of the Nodes without a view: the
// connection's bytes (in w), its GETs, and those not served from the watch
// cache.
type fallback struct {
	w           *watcher
	gets        atomic.Int64
	quorumGets  atomic.Int64
	listings    int
	first       time.Duration // the first listing (every old agent's Node read)
	firstGets   int64
	firstBytes  int64
	refresh     time.Duration // the TTL the agent then keeps them
	listedNodes int
}

// runFallback lists the Nodes as the upgraded agent on the first Node
// (its cache: c) does, once a second (the announcer passes on every
// Service or EndpointSlice event, and at least every TTL) until ctx ends,
// its gossip naming every node.
func runFallback(ctx context.Context, cfg *rest.Config, c client.Reader, nodes int) (*fallback, error) {
	f := &fallback{w: &watcher{name: "upgraded agent's fallback GETs"}}
	cfg = f.w.countingConfig(cfg)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper {
		return roundTripper(func(req *http.Request) (*http.Response, error) {
			if req.Method == http.MethodGet && strings.HasPrefix(req.URL.Path, "/api/v1/nodes/") {
				f.gets.Add(1)
				if req.URL.Query().Get("resourceVersion") != "0" {
					f.quorumGets.Add(1)
				}
			}
			return rt.RoundTrip(req)
		})
	})
	direct, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		return nil, err
	}
	// The client's discovery of the Node kind is not the fallback's.
	if _, err := direct.RESTMapper().RESTMapping(schema.GroupKind{Kind: "Node"}); err != nil {
		return nil, err
	}
	f.w.bytes.Store(0)
	members := make([]string, nodes)
	for i := range members {
		members[i] = nodeName(i)
	}
	// The agent's own listing, as its announcer runs it on each pass: c is its cache (its own
	// Node and the NodeViews), direct the API server, members the agents alive in the gossip.
	unviewed := &agentnodes.Unviewed{Direct: direct, Members: func() []string { return members }}
	for {
		start := time.Now()
		listed, err := agentnodes.ListOnly(ctx, c, unviewed)
		refresh := unviewed.RefreshEvery()
		if ctx.Err() != nil {
			return f, nil
		}
		if err != nil {
			return nil, err
		}
		if f.listings == 0 {
			f.first, f.firstGets, f.firstBytes = time.Since(start), f.gets.Load(), f.w.bytes.Load()
		}
		f.listings++
		f.refresh, f.listedNodes = refresh, len(listed)
		select {
		case <-ctx.Done():
			return f, nil
		case <-time.After(time.Second):
		}
	}
}

// unviewedTTL is how long an agent keeps a Node it read without a view, as
// nodeagent/nodes sets it (unviewedTTL there): 200 ms a node, so at most 5 GETs a
// second, and at least 10 s. printUpgrade warns when the measured TTL differs.
func unviewedTTL(n int) time.Duration {
	return max(10*time.Second, time.Duration(n)*time.Second/5)
}

// unviewedGETsPerSecond is what one agent's reads of n Nodes without a view
// cost the API server on average: n GETs every unviewedTTL(n).
func unviewedGETsPerSecond(n int) float64 {
	return float64(n) / unviewedTTL(n).Seconds()
}

type roundTripper func(*http.Request) (*http.Response, error)

func (f roundTripper) RoundTrip(req *http.Request) (*http.Response, error) { return f(req) }

// printUpgrade prints what the fallback cost over the window, what it costs
// an agent once its reads are warm (every Node it read, again every TTL), and
// that multiplied out over the agents at the worst point of the upgrade,
// against beforeViews, the API server's output (bytes/s) when every agent
// watched every Node.
func printUpgrade(f *fallback, nodes, old int, secs, beforeViews float64) {
	gets, bytes := f.gets.Load(), f.w.bytes.Load()
	perGet := float64(bytes) / max(1, float64(gets))
	fmt.Printf("  rolling upgrade: %d of %d Nodes without a NodeView (old agents); one upgraded agent reads them (nodeagent/nodes' Unviewed, its own connection):\n", old, nodes)
	fmt.Printf("    first listing: %d GETs, %.1f MiB, in %s; it lists %d Nodes, and reads them again every %s (their TTL)\n",
		f.firstGets, mib(f.firstBytes), f.first.Round(time.Millisecond), f.listedNodes, f.refresh)
	fmt.Printf("    over the %.0f s window (%d listings, the first included): %d GETs (%d not from the watch cache), %.1f GETs/s, %.1f KiB/s, %.1f KiB a GET\n",
		secs, f.listings, gets, f.quorumGets.Load(), float64(gets)/secs, float64(bytes)/secs/1024, perGet/1024)
	if want := unviewedTTL(old); f.refresh != want {
		fmt.Printf("    WARNING: the agent reads them again every %s, the figures below assume %s: update unviewedTTL in bench/watch\n", f.refresh, want)
	}
	steady := unviewedGETsPerSecond(old)
	fmt.Printf("    warm (%d GETs every %s): %.1f GETs/s, %.1f KiB/s per upgraded agent\n", old, f.refresh, steady, steady*perGet/1024)
	worstK, worst := 0, 0.0
	for k := 1; k < nodes; k++ {
		if r := float64(k) * unviewedGETsPerSecond(nodes-k); r > worst {
			worstK, worst = k, r
		}
	}
	fmt.Printf("    the API server, k upgraded agents each reading the %d-k others (k × unviewedGETsPerSecond(%d-k)), worst at k=%d: %.0f GETs/s, %.1f MiB/s (before NodeViews, every agent watching every Node: %.1f MiB/s)\n",
		nodes, nodes, worstK, worst, worst*perGet/(1<<20), beforeViews/(1<<20))
}

// getCost measures what n GETs of a Node (16 at once) cost the API server
// and etcd, in CPU seconds read from /proc: served from the watch cache
// (resourceVersion "0") and as a quorum read.
func getCost(ctx context.Context, cfg *rest.Config, nodes, n int) error {
	api, etcd, err := controlPlanePIDs()
	if err != nil {
		return err
	}
	cfg = rest.CopyConfig(cfg)
	cfg.QPS = -1 // no client-side limit: the burst is the point
	c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		return err
	}
	burst := func(opts ...client.GetOption) (time.Duration, error) {
		start := time.Now()
		err := fanout.Run(16, n, func(i int) error {
			var nd corev1.Node
			return c.Get(ctx, client.ObjectKey{Name: nodeName(i % nodes)}, &nd, opts...)
		})
		return time.Since(start), err
	}
	fromCache := []client.GetOption{&client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}}}
	for _, opts := range [][]client.GetOption{fromCache, nil} { // warm the connections and caches
		if _, err := burst(opts...); err != nil {
			return err
		}
	}
	fmt.Printf("  what %d GETs of a Node (16 at once) cost: CPU seconds per 1,000 GETs (from /proc/<pid>/stat), twice each way\n", n)
	for round := range 4 {
		name, opts := "resourceVersion \"0\" (the watch cache)", fromCache
		if round%2 == 1 {
			name, opts = "quorum read (no resourceVersion)", nil
		}
		api0, etcd0 := procmem.CPU(api, false), procmem.CPU(etcd, false)
		took, err := burst(opts...)
		if err != nil {
			return fmt.Errorf("%s: %w", name, err)
		}
		per := 1000 / float64(n)
		fmt.Printf("    %-42s kube-apiserver %5.2f s, etcd %5.2f s (%.0f GETs/s)\n", name,
			(procmem.CPU(api, false)-api0)*per, (procmem.CPU(etcd, false)-etcd0)*per, float64(n)/took.Seconds())
	}
	return nil
}

// controlPlanePIDs finds the kube-apiserver and etcd this process started.
func controlPlanePIDs() (api, etcd int, err error) {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	for _, s := range stats {
		pid, _ := strconv.Atoi(filepath.Base(filepath.Dir(s)))
		comm, fields, ok := procmem.Stat(pid)
		if !ok || len(fields) < 2 || fields[1] != strconv.Itoa(os.Getpid()) { // fields[1]: the parent
			continue
		}
		switch comm {
		case "kube-apiserver":
			api = pid
		case "etcd":
			etcd = pid
		}
	}
	if api == 0 || etcd == 0 {
		return 0, 0, fmt.Errorf("no kube-apiserver (%d) or etcd (%d) among this process's children", api, etcd)
	}
	return api, etcd, nil
}
