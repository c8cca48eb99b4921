package main

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/kubernetes"

	"github.com/paas-org/vip-allocator-operator/internal/procmem"
)

// The operator does little CPU work per Service, so its throughput is set by
// what its Service workers wait for. waitSamples classes them by sampling the
// operator's goroutines (pprof, debug=1: identical stacks counted together)
// every 250 ms while Services are pending.
type waitSamples struct {
	mu      sync.Mutex
	samples int
	counts  map[string]int // "what it waits for, in which function" -> goroutines over all samples
}

// operatorPprof is the operator's pprof address: $PPROF (for CPU and heap
// profiles, see run), or the bench's own.
func operatorPprof() string {
	if a := os.Getenv("PPROF"); a != "" {
		return a
	}
	return pprofAddr
}

func sampleWaits(addr string, done <-chan struct{}) *waitSamples {
	w := &waitSamples{counts: map[string]int{}}
	tick := time.NewTicker(250 * time.Millisecond)
	go func() {
		defer tick.Stop()
		for {
			select {
			case <-done:
				return
			case <-tick.C:
			}
			resp, err := http.Get("http://" + addr + "/debug/pprof/goroutine?debug=1")
			if err != nil {
				continue // not listening yet
			}
			stacks, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			w.mu.Lock()
			w.samples++
			for what, n := range classify(string(stacks)) {
				w.counts[what] += n
			}
			w.mu.Unlock()
		}
	}()
	return w
}

// classify counts the goroutines inside the Service reconciler by what they wait for.
func classify(dump string) map[string]int {
	out := map[string]int{}
	for _, block := range strings.Split(dump, "\n\n") {
		lines := strings.Split(block, "\n")
		count, _, ok := strings.Cut(lines[0], " @ ")
		n, err := strconv.Atoi(count)
		if !ok || err != nil || !strings.Contains(block, "controllers.(*ServiceReconciler).Reconcile") {
			continue
		}
		kind, in := "running or runnable", ""
		for _, l := range lines[1:] {
			switch {
			case kind != "running or runnable":
			case strings.Contains(l, "flowcontrol.") || strings.Contains(l, "x/time/rate."):
				kind = "client rate limiter"
			case strings.Contains(l, "net/http.") && (strings.Contains(l, "roundTrip") || strings.Contains(l, "RoundTrip")),
				strings.Contains(l, "http2.(*ClientConn).RoundTrip"), strings.Contains(l, "http2.(*clientStream)"):
				kind = "API round trip"
			case strings.Contains(l, "sync.(*Mutex).Lock") || strings.Contains(l, "sync.(*RWMutex)"):
				kind = "a lock"
			}
			if in == "" {
				if _, f, ok := strings.Cut(l, "vip-allocator-operator/controllers."); ok {
					in, _, _ = strings.Cut(f, "+")
				}
			}
		}
		out[kind+" in "+in] += n
	}
	return out
}

// String is the mean number of Service workers per sample in each state, largest first.
func (w *waitSamples) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.samples == 0 {
		return "none taken"
	}
	type entry struct {
		what string
		n    int
	}
	var es []entry
	total := 0
	for k, v := range w.counts {
		es = append(es, entry{k, v})
		total += v
	}
	sort.Slice(es, func(i, j int) bool { return es[i].n > es[j].n })
	var b strings.Builder
	fmt.Fprintf(&b, "%.1f in Reconcile on average over %d samples", float64(total)/float64(w.samples), w.samples)
	for _, e := range es {
		fmt.Fprintf(&b, "\n      %5.1f  %s", float64(e.n)/float64(w.samples), e.what)
	}
	return b.String()
}

// controlPlaneCPU reads what the local control plane in dir (its pid files)
// and this bench process have used, so a phase's CPU can be split by who
// spent it: on a 2-core machine the API server shares the CPUs with the
// writer it serves, and a writer that costs the API server more per Service
// (watches, Events, its own CPU) gets fewer Services out of it.
type controlPlaneCPU struct{ apiServer, etcd int }

type cpuSplit struct{ apiServer, etcd, self float64 }

func newControlPlaneCPU(dir string) controlPlaneCPU {
	pid := func(name string) int {
		b, _ := os.ReadFile(filepath.Join(dir, name+".pid"))
		n, _ := strconv.Atoi(strings.TrimSpace(string(b)))
		return n
	}
	return controlPlaneCPU{apiServer: pid("kube-apiserver"), etcd: pid("etcd")}
}

func (c controlPlaneCPU) read() cpuSplit {
	return cpuSplit{apiServer: procmem.CPU(c.apiServer, false), etcd: procmem.CPU(c.etcd, false), self: procmem.CPU(os.Getpid(), false)}
}

// since is the CPU used from s until now, each part.
func (c controlPlaneCPU) since(s cpuSplit) cpuSplit {
	now := c.read()
	return cpuSplit{apiServer: now.apiServer - s.apiServer, etcd: now.etcd - s.etcd, self: now.self - s.self}
}

// perService formats s in milliseconds per Service, with the writer's own
// CPU (the bench's workers, or the operator's process) beside it.
func (s cpuSplit) perService(n int, writer float64) string {
	ms := func(sec float64) float64 { return sec * 1000 / float64(n) }
	return fmt.Sprintf("API server %.2f, etcd %.2f, writer %.2f ms/Service", ms(s.apiServer), ms(s.etcd), ms(writer))
}

// apiCounts are the API server's own counters of what it served: requests by
// verb and resource (apiserver_request_total) and watch events sent by kind
// (apiserver_watch_events_total), from its /metrics.
type apiCounts map[string]float64

func readAPICounts(ctx context.Context, cs *kubernetes.Clientset) (apiCounts, error) {
	raw, err := cs.RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("API server metrics: %w", err)
	}
	out := apiCounts{}
	for line := range strings.Lines(string(raw)) {
		var name string
		switch {
		case strings.HasPrefix(line, "apiserver_request_total{"):
			name = "request"
		case strings.HasPrefix(line, "apiserver_watch_events_total{"):
			name = "watch event"
		default:
			continue
		}
		labels, value, _ := strings.Cut(strings.TrimSpace(line[strings.Index(line, "{"):]), "} ")
		v, _ := strconv.ParseFloat(value, 64)
		l := map[string]string{}
		for kv := range strings.SplitSeq(strings.Trim(labels, "{}"), ",") {
			k, val, _ := strings.Cut(kv, "=")
			l[k] = strings.Trim(val, `"`)
		}
		resource := l["resource"]
		if l["subresource"] != "" {
			resource += "/" + l["subresource"]
		}
		out[strings.Join(strings.Fields(name+" "+l["verb"]+" "+resource+" "+l["kind"]), " ")] += v
	}
	return out, nil
}

// perService is what changed from before to c, per Service, largest first;
// what happened fewer than 0.01 times per Service (the lists of a start-up)
// follows on one line, each with its count.
func (c apiCounts) perService(before apiCounts, n int) string {
	type entry struct {
		what  string
		count float64
	}
	var es []entry
	for k, v := range c {
		if d := v - before[k]; d > 0 {
			es = append(es, entry{k, d})
		}
	}
	sort.Slice(es, func(i, j int) bool { return es[i].count > es[j].count })
	var b, rare strings.Builder
	for _, e := range es {
		if per := e.count / float64(n); per >= 0.01 {
			fmt.Fprintf(&b, "\n      %6.2f  %s", per, e.what)
		} else {
			fmt.Fprintf(&rare, "; %s %.0f", e.what, e.count)
		}
	}
	if rare.Len() > 0 {
		fmt.Fprintf(&b, "\n      fewer: %s", strings.TrimPrefix(rare.String(), "; "))
	}
	return b.String()
}
