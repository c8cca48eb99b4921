//go:build root && envtest

package e2e

import (
	"fmt"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// BenchmarkFailover measures layer-2 failover in the three-node lab: how long
// after an unplanned failure (the owner's agent SIGKILLed, or the owner's link
// down) the client's neighbour entry for the VIP points at another node, and
// how many requests a 20 Hz curl loop loses through planned moves (cordon and
// uncordon, agent SIGTERM restarts). It runs once with the agents' tuned
// liveness timers and once with memberlist's LAN defaults, the baseline.
// The lab is dual-stack: the Service's IPv6 VIP (announced by NDP) goes
// through the same SIGKILL rounds as its IPv4 one. Through the planned moves
// the client also holds a keep-alive connection open, and the same moves run
// once more with the connection handoff off (the baseline for open
// connections). Run with make bench-failover.
func BenchmarkFailover(b *testing.B) {
	benchFailover(b, failoverBench{rounds: 10, planned: 10, timers: []string{"tuned", "lan"}, withoutHandoff: true})
}

// TestBenchFailoverSmoke is BenchmarkFailover at a size the normal test run
// affords, so the benchmark cannot rot: tuned timers only, one SIGKILL (IPv4
// and IPv6), one planned move (a cordon).
func TestBenchFailoverSmoke(t *testing.T) {
	benchFailover(t, failoverBench{rounds: 1, planned: 1, timers: []string{"tuned"}})
}

// failoverBench is what one run of the failover benchmark covers.
type failoverBench struct {
	rounds         int      // unplanned failures per timer set, SIGKILL and link down alternating
	planned        int      // planned moves with the tuned timers, cordon and restart alternating
	timers         []string // liveness timer sets; "tuned" first, the others are baselines
	withoutHandoff bool     // the planned moves once more with the connection handoff off
}

func benchFailover(tb testing.TB, f failoverBench) {
	var median = map[string]time.Duration{}
	for _, timers := range f.timers {
		subtest(tb, timers, func(tb testing.TB) {
			d, vip, vip6 := failoverLab(tb, "--liveness-timers", timers)
			var kills, links, kills6 []time.Duration
			for i := range f.rounds {
				if i%2 == 0 {
					kills = append(kills, d.unplanned(tb, vip, "kill"))
					kills6 = append(kills6, d.unplanned(tb, vip6, "kill"))
				} else {
					links = append(links, d.unplanned(tb, vip, "link"))
				}
			}
			all := append(append([]time.Duration{}, kills...), links...)
			median[timers] = quantile(all, 0.5)
			fmt.Printf("\nunplanned failover, %s timers (client's neighbour entry moved to the new owner):\n", timers)
			fmt.Printf("  agent SIGKILL  median %6s  worst %6s  %v\n", quantile(kills, 0.5), quantile(kills, 1), kills)
			fmt.Printf("  link down      median %6s  worst %6s  %v\n", quantile(links, 0.5), quantile(links, 1), links)
			fmt.Printf("  all %d         median %6s  worst %6s  (targets: median < 1.5s, worst < 2.5s)\n", len(all), quantile(all, 0.5), quantile(all, 1))
			fmt.Printf("  IPv6 (NDP), agent SIGKILL  median %6s  worst %6s  %v\n", quantile(kills6, 0.5), quantile(kills6, 1), kills6)
			if timers != "tuned" {
				return
			}
			d.plannedRounds(tb, vip, f.planned, "")
		})
	}
	if f.withoutHandoff {
		subtest(tb, "tuned-without-handoff", func(tb testing.TB) {
			d, vip, _ := failoverLab(tb, "--liveness-timers", "tuned", "--connection-handoff=false")
			d.plannedRounds(tb, vip, f.planned, ", connection handoff off (baseline)")
		})
	}
	if median["tuned"] > 0 && median["lan"] > 0 { // both ran (not with -bench BenchmarkFailover/tuned)
		fmt.Printf("\nratio, median unplanned failover, LAN defaults / tuned: %.1fx\n", float64(median["lan"])/float64(median["tuned"]))
	}
}

// subtest runs f as a sub-benchmark or a subtest, whichever tb is.
func subtest(tb testing.TB, name string, f func(testing.TB)) {
	switch p := tb.(type) {
	case *testing.B:
		p.Run(name, func(b *testing.B) { f(b) })
	case *testing.T:
		p.Run(name, func(t *testing.T) { f(t) })
	default:
		tb.Fatalf("subtest %s: %T is neither a test nor a benchmark", name, tb)
	}
}

func failoverLab(b testing.TB, agentArgs ...string) (d *l2Lab, vip4, vip6 string) {
	d = setupL2DualStack(b)
	d.agentArgs = agentArgs
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(b, n, agentArgs...)
	}
	d.dualStackGroups(b)
	vip4, vip6 = d.dualStackService(b, "web")
	d.owner(b, vip4, "")
	d.owner(b, vip6, "")
	return d, vip4, vip6
}

// unplanned fails the VIP's owner (kill: SIGKILL its agent; link: its LAN
// link down) and returns how long until the client's neighbour entry for the
// VIP names another node's MAC; then it brings the node back.
func (d *l2Lab) unplanned(b testing.TB, vip, how string) time.Duration {
	from := d.owner(b, vip, "")
	l := d.curlLoop(vipURL(vip)) // keeps the client's entry fresh
	time.Sleep(500 * time.Millisecond)
	start := time.Now()
	switch how {
	case "kill":
		_ = d.agents[from].Process.Kill()
		_ = d.agents[from].Wait()
		delete(d.agents, from)
	case "link":
		d.in(from, "ip", "link", "set", "eth0", "down")
	}
	var took time.Duration
	for time.Since(start) < 30*time.Second {
		if mac := d.clientNeighbour(vip); mac != "" && mac != d.macs[from] && slices.Contains(mapValues(d.macs), mac) {
			took = time.Since(start).Round(10 * time.Millisecond)
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	l.end()
	if took == 0 {
		b.Fatalf("%s: no other node took %s over within 30 s", how, vip)
	}
	switch how {
	case "kill":
		d.startAgent(b, from, d.agentArgs...)
	case "link":
		d.in(from, "ip", "link", "set", "eth0", "up")
	}
	d.waitAnnouncer(b, vip, from)
	time.Sleep(time.Second) // its gratuitous ARP (unsolicited advertisement) has moved the client back
	return took
}

// plannedRounds runs rounds planned moves, alternating cordon+uncordon and
// agent SIGTERM restarts, and prints what the curl loop and the held
// connections lost.
func (d *l2Lab) plannedRounds(b testing.TB, vip string, rounds int, label string) {
	var total, failed, broken int64
	for i := range rounds {
		ok, bad, heldErr := d.planned(b, vip, i%2 == 0)
		total, failed = total+ok+bad, failed+bad
		if heldErr != nil {
			broken++
			how := map[bool]string{true: "cordon", false: "restart"}[i%2 == 0]
			fmt.Printf("  round %d (%s): %v\n", i+1, how, heldErr)
		}
	}
	fmt.Printf("planned moves (%d: cordon+uncordon and agent SIGTERM restarts)%s:\n", rounds, label)
	fmt.Printf("  20 Hz curl, a new connection each: %d requests, %d failed (target 0)\n", total, failed)
	fmt.Printf("  a keep-alive connection held open through each move: %d of %d broken (target 0)\n", broken, rounds)
}

// planned moves the VIP off its owner and back, by cordon or by an agent
// SIGTERM restart, under a 20 Hz curl loop and with a keep-alive connection
// held open; it returns good and failed requests, and why the held
// connection broke (nil: it did not).
func (d *l2Lab) planned(b testing.TB, vip string, cordon bool) (ok, failed int64, heldErr any) {
	from := d.owner(b, vip, "")
	l := d.curlLoop(vipURL(vip))
	h := d.heldConnection(b, vipHostPort(vip))
	time.Sleep(500 * time.Millisecond)
	if cordon {
		d.cordon(b, from, true)
		d.owner(b, vip, from)
		time.Sleep(3 * time.Second)
		d.cordon(b, from, false)
	} else {
		d.stopAgent(from)
		d.startAgent(b, from, d.agentArgs...)
	}
	d.waitAnnouncer(b, vip, from)
	time.Sleep(3 * time.Second)
	ok, failed, _ = l.end()
	_, _, heldErr = h.end()
	return ok, failed, heldErr
}

// clientNeighbour is the MAC the client's neighbour table holds for vip.
func (d *l2Lab) clientNeighbour(vip string) string {
	out, _ := exec.Command("ip", "netns", "exec", d.ns("client"), "ip", "neigh", "show", vip, "dev", "eth0").Output()
	f := strings.Fields(string(out))
	for i := 0; i+1 < len(f); i++ {
		if f[i] == "lladdr" {
			return strings.ToLower(f[i+1])
		}
	}
	return ""
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

func quantile(ds []time.Duration, q float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[int(q*float64(len(s)-1)+0.5)]
}
