// Command dataplane is 'make bench-dataplane': inside throwaway network namespaces it measures
// the node agent's data planes (nodeagent/dataplane), nftables first, then iptables-restore on
// both iptables backends:
//
//   - a full Sync of 1,000 and 10,000 Services x 2 ports x 5 endpoints (IPv4, policy Cluster),
//     from empty (agent start) and again over itself (periodic resync);
//   - a one-Service change at that size (partial Sync) and a Sync with no change;
//   - the baseline: the same rules written one go-iptables call per rule, for a few hundred
//     Services, extrapolated linearly to 10,000;
//   - with -return-marks (the default), all of it on a node on two networks: the connections
//     to one interface's VIPs marked for the way back (mangle VIPA-RETURN) before the first Sync;
//   - the resident memory after the 10,000-Service syncs (each plane, family and size runs in a
//     process of its own, so the high-water mark is its own);
//   - ratios of the full and one-Service Syncs at the largest size: each plane against the
//     first one.
//
// Addresses come from the documentation ranges only. IPv4 has 512 usable VIPs there, so
// Services share VIPs on distinct ports; the rule count and shape per Service port are the same
// as with unique VIPs, but the filter chain (2 rules per VIP) is smaller. -ipv6 adds a run with
// every VIP and endpoint unique (2001:db8::/32), which has the full-size filter chain.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
	"github.com/paas-org/vip-allocator-operator/internal/procmem"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// Targets from the design, reported against.
const (
	targetFull    = 2 * time.Second
	targetPartial = 150 * time.Millisecond
	targetRSSMiB  = 60
)

func main() {
	sizes := flag.String("sizes", "1000,10000", "Service counts")
	backends := flag.String("planes", "nftables,nft,legacy", "planes to measure: nftables, or an iptables backend (nft, legacy); the first is the one the others are compared with")
	baseline := flag.Int("baseline", 200, "Services written one go-iptables call per rule (0 = skip)")
	ipv6 := flag.Bool("ipv6", true, "also measure IPv6 with unique VIPs at the largest size")
	one := flag.String("one", "", "internal: measure plane/family/size alone in this process")
	flag.Parse()
	var ns []int
	for _, s := range strings.Split(*sizes, ",") {
		n, err := strconv.Atoi(s)
		if err != nil {
			fmt.Fprintln(os.Stderr, "bench-dataplane: -sizes:", err)
			os.Exit(2)
		}
		ns = append(ns, n)
	}
	if *one != "" {
		runOne(*one)
		return
	}
	ok := true
	for _, b := range strings.Split(*backends, ",") {
		fams := []dataplane.Family{dataplane.IPv4}
		if *ipv6 {
			fams = append(fams, dataplane.IPv6)
		}
		for _, fam := range fams {
			sz := ns
			if fam == dataplane.IPv6 {
				sz = ns[len(ns)-1:]
			}
			for _, n := range sz { // each size from an empty namespace: an agent's cold start
				if err := runChild(fmt.Sprintf("%s/%s/%d", b, fam, n)); err != nil {
					fmt.Fprintln(os.Stderr, "bench-dataplane:", err)
					ok = false
				}
			}
		}
		if *baseline > 0 && b != dataplane.PlaneNFTables {
			if err := inNetns(func() error { return benchBaseline(b, *baseline, ns[len(ns)-1]) }); err != nil {
				fmt.Fprintln(os.Stderr, "bench-dataplane:", err)
				ok = false
			}
		}
	}
	printRatios(strings.Split(*backends, ","))
	if !ok {
		os.Exit(1)
	}
}

// runChild measures one plane, family and size in a process of its own, so that its memory
// high-water mark is its own, and collects its figures for the ratios.
func runChild(spec string) error {
	cmd := exec.Command(os.Args[0], "-one", spec, fmt.Sprintf("-return-marks=%v", *withReturnMarks))
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("run %s: %w", spec, err)
	}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		var plane, what string
		var d time.Duration
		if line := sc.Text(); strings.HasPrefix(line, "#measured ") {
			parts := strings.SplitN(line, " ", 4) // #measured plane nanoseconds what
			plane, what = parts[1], parts[3]
			n, _ := strconv.ParseInt(parts[2], 10, 64)
			d = time.Duration(n)
			record(plane, what, d)
		} else {
			fmt.Println(line)
		}
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("%s: %w", spec, err)
	}
	return nil
}

// runOne is the child's side of runChild: spec is plane/family/size.
func runOne(spec string) {
	parts := strings.Split(spec, "/")
	n, err := strconv.Atoi(parts[2])
	if err == nil {
		err = inNetns(func() error { return benchSyncs(parts[0], dataplane.Family(parts[1]), n) })
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bench-dataplane:", err)
		os.Exit(1)
	}
	for plane, whats := range measured {
		for what, d := range whats {
			fmt.Printf("#measured %s %d %s\n", plane, d.Nanoseconds(), what)
		}
	}
}

func record(plane, what string, d time.Duration) {
	if measured[plane] == nil {
		measured[plane] = map[string]time.Duration{}
	}
	measured[plane][what] = d
}

// measured holds the IPv4 figures at the last (largest) size, per plane, for printRatios.
var measured = map[string]map[string]time.Duration{}

func printRatios(planes []string) {
	first := measured[planes[0]]
	for _, p := range planes[1:] {
		for _, what := range []string{"full (cold start)", "partial (1 changed)"} {
			if first[what] > 0 && measured[p][what] > 0 {
				fmt.Printf("ratio IPv4 %-22s %s %.1f ms / %s %.1f ms = %.1fx\n", what, p, ms(measured[p][what]),
					planes[0], ms(first[what]), float64(measured[p][what])/float64(first[what]))
			}
		}
	}
}

// current is the namespace in use, deleted on SIGINT/SIGTERM so an interrupted run leaves
// nothing behind.
var current atomic.Value

func init() {
	sig := make(chan os.Signal, 1)
	signal.Notify(sig, os.Interrupt, syscall.SIGTERM)
	go func() {
		<-sig
		if name, _ := current.Load().(string); name != "" {
			exec.Command("ip", "netns", "del", name).Run()
		}
		os.Exit(130)
	}()
}

// inNetns runs f in a fresh network namespace and deletes the namespace afterwards, whatever
// f returns. f runs on this goroutine, which netnstest pins to the namespace's thread.
func inNetns(f func() error) (err error) {
	name, leave, err := netnstest.Enter("vipa-bench")
	if err != nil {
		return err
	}
	current.Store(name)
	defer func() {
		current.Store("")
		if lerr := leave(); lerr != nil && err == nil {
			err = lerr
		}
	}()
	return f()
}

// benchSyncs measures one size from an empty namespace: a cold-start full Sync, a full resync,
// a partial Sync with one Service changed and one with nothing changed, Healthy, and memory.
func benchSyncs(backend string, fam dataplane.Family, n int) error {
	var dp dataplane.Plane
	var err error
	if backend == dataplane.PlaneNFTables {
		dp, err = dataplane.NewNFTables(dataplane.Config{Family: fam})
	} else {
		dp, err = dataplane.NewIPTables(dataplane.Config{Family: fam, Backend: backend})
	}
	if err != nil {
		return err
	}
	if err := setReturnMarks(dp, backend, fam, n); err != nil {
		return err
	}
	svcs := services(fam, n)
	sync := func(what string, full bool, target time.Duration) error {
		st, err := dp.Sync(svcs, full)
		if err != nil {
			return fmt.Errorf("%s %s %s n=%d: %w", backend, fam, what, n, err)
		}
		verdict := ""
		if target > 0 && n >= 10000 {
			verdict = fmt.Sprintf("  target < %v: %s", target, pass(st.Duration < target))
		}
		fmt.Printf("%-8s %-4s n=%-6d %-22s %9.1f ms  %7d rules %6d chains %7d elements%s\n",
			backend, fam, n, what, ms(st.Duration), st.Rules, st.Chains, st.Elements, verdict)
		if fam == dataplane.IPv4 { // the parent keeps the last size's: the largest, as -sizes lists them
			record(backend, what, st.Duration)
		}
		return nil
	}
	if err := sync("full (cold start)", true, targetFull); err != nil {
		return err
	}
	if err := sync("full (resync)", true, targetFull); err != nil {
		return err
	}
	// One Service's endpoint moves: its chains change, nothing else does.
	k := n / 2
	svcs[k].Endpoints[0].Addr = svcs[k].Endpoints[0].Addr.Next()
	if err := sync("partial (1 changed)", false, targetPartial); err != nil {
		return err
	}
	if err := sync("partial (no change)", false, 0); err != nil {
		return err
	}
	if backend != dataplane.PlaneNFTables {
		floor, err := restoreFloor(backend, fam)
		if err != nil {
			return err
		}
		fmt.Printf("%-8s %-4s n=%-6d %-22s %9.1f ms  (one iptables-restore adding one rule: the least any partial Sync that writes pays)\n",
			backend, fam, n, "restore floor", ms(floor))
	}
	start := time.Now()
	healthy := dp.Healthy()
	fmt.Printf("%-8s %-4s n=%-6d %-22s %9.1f ms  (%v)\n", backend, fam, n, "Healthy()", ms(time.Since(start)), healthy)
	if n >= 10000 {
		rss, hwm := procmem.Read("self")
		var mem runtime.MemStats
		runtime.ReadMemStats(&mem)
		fmt.Printf("%-8s %-4s n=%-6d memory after syncs: VmRSS %.1f MiB, VmHWM %.1f MiB (a process for this plane and size alone), Go heap in use %.1f MiB  target RSS < %d MiB: %s\n",
			backend, fam, n, rss, hwm, float64(mem.HeapInuse)/(1<<20), targetRSSMiB, pass(hwm < targetRSSMiB))
	}
	return nil
}

// restoreFloor times one iptables-restore that rewrites our canary chain: the fixed cost of
// any commit that adds a rule, paid by iptables and the kernel whatever the payload.
func restoreFloor(backend string, fam dataplane.Family) (time.Duration, error) {
	bin := "iptables-" + backend + "-restore"
	if fam == dataplane.IPv6 {
		bin = "ip6tables-" + backend + "-restore"
	}
	cmd := exec.Command(bin, "--noflush")
	cmd.Stdin = strings.NewReader("*nat\n:VIPA-CANARY - [0:0]\n-A VIPA-CANARY -j RETURN\nCOMMIT\n")
	start := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		return 0, fmt.Errorf("%s: %w: %s", bin, err, out)
	}
	return time.Since(start), nil
}

func pass(ok bool) string {
	if ok {
		return "met"
	}
	return "MISSED"
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
