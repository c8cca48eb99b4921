//go:build root && envtest

package e2e

import (
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/arpflood"
	"github.com/paas-org/vip-allocator-operator/internal/procmem"
)

// BenchmarkARPFlood: a LAN neighbour (the attacker namespace) sends the owner
// of a VIP 10,000 forged ARP replies a second for 30 s, each claiming the VIP
// for a new random MAC. Reported: the owner agent's RSS and CPU (from /proc)
// idle before, during and after the flood, and whether the client's ARP
// requests (5 Hz) were answered by the owner throughout. With
// $VIPA_BASELINE_BIN set (make bench-arpflood builds the agent of the commit
// before the claim gate there), the same flood runs against that agent too,
// side by side. Run with make bench-arpflood.
func BenchmarkARPFlood(b *testing.B) {
	const perSecond, flood = 10_000, 30 * time.Second
	agents := []struct{ name, bin string }{{"this build", ""}}
	if base := os.Getenv("VIPA_BASELINE_BIN"); base != "" {
		agents = append(agents, struct{ name, bin string }{"baseline", base})
	}
	var rows []string
	for _, a := range agents {
		b.Run(strings.ReplaceAll(a.name, " ", "-"), func(b *testing.B) {
			if a.bin != "" {
				b.Setenv("VIP_ALLOCATOR_BIN", a.bin)
			}
			args := []string{"--metrics-bind-address", "127.0.0.1:19478"}
			if a.bin == "" { // the baseline predates the flag (and served plain HTTP)
				args = append(args, "--metrics-secure=false")
			}
			d, vip, owner := floodLab(b, args...)
			pid := d.agents[owner].Process.Pid
			idle := watchProc(pid)
			time.Sleep(10 * time.Second)
			before := idle.stop()
			during := watchProc(pid)
			r := d.floodClaims(b, vip, owner, perSecond, flood)
			peak := during.stop()
			after := watchProc(pid)
			time.Sleep(10 * time.Second)
			calm := after.stop()
			ignored := d.agentMetric(owner, "vip_allocator_agent_arp_claims_ignored_total")
			conflicts := d.agentMetric(owner, "vip_allocator_agent_arp_conflicts_total")
			rows = append(rows, fmt.Sprintf("%-10s  idle %s | flood %s | after %s | ARP answered %d/%d, curl %d/%d | claims sent %d, ignored %s, reported %s",
				a.name, before, peak, calm, r.answered, r.asked, r.curlOK, r.curls, r.sent, ignored, conflicts))
			// The baseline is there to show what the flood did before the
			// claim gate: it may fail.
			if a.bin == "" && r.answered != r.asked {
				b.Errorf("%s: the owner answered %d of the client's %d ARP requests under the flood", a.name, r.answered, r.asked)
			}
		})
	}
	fmt.Printf("\nARP flood: %d forged claims/s of an owned VIP for %s from random MACs (owner agent; CPU %% of one core, RSS max over the phase)\n", perSecond, flood)
	for _, r := range rows {
		fmt.Println("  " + r)
	}
}

// floodLab is the L2 lab with its three agents, an attacker on the LAN and a
// Service whose VIP is owned; it returns the VIP and its owner.
func floodLab(t testing.TB, agentArgs ...string) (d *l2Lab, vip, owner string) {
	d, _, vip, owner = announcedLab(t, agentArgs...)
	return d, vip, owner
}

// floodResult is what the client saw while the owner was flooded.
type floodResult struct {
	sent                           int
	asked, answered, curls, curlOK int
}

// floodClaims sends owner perSecond forged claims of vip for d from the
// attacker namespace (made on first use) while the client asks for vip by ARP
// and curls it, each at 5 Hz.
func (d *l2Lab) floodClaims(t testing.TB, vip, owner string, perSecond int, dur time.Duration) floodResult {
	t.Helper()
	if _, err := os.Stat("/run/netns/" + d.ns("attacker")); err != nil {
		d.addNS("attacker")
		d.plug("attacker", "eth0", "lan", "192.0.2.30/24")
	}
	s, err := arpflood.Dial(d.ns("attacker"), "eth0")
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mac, err := net.ParseMAC(d.macs[owner])
	if err != nil {
		t.Fatal(err)
	}
	var r floodResult
	var floodErr error
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		r.sent, floodErr = s.Flood(netip.MustParseAddr(vip), netip.MustParseAddr(lanIP[owner]), mac, perSecond, dur)
	}()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for end := time.Now().Add(dur); time.Now().Before(end); <-tick.C {
		r.asked++
		out, _ := exec.Command("ip", "netns", "exec", d.ns("client"), "arping", "-c", "1", "-w", "1", "-I", "eth0", vip).CombinedOutput()
		if strings.Contains(strings.ToLower(string(out)), d.macs[owner]) {
			r.answered++
		}
		r.curls++
		if _, err := d.curl(vipURL(vip)); err == nil {
			r.curlOK++
		}
	}
	wg.Wait()
	if floodErr != nil {
		t.Fatal(floodErr)
	}
	return r
}

// agentMetric reads one unlabelled metric of node's agent ("-" when it has
// none, as an agent built before the metric existed).
func (d *l2Lab) agentMetric(node, name string) string {
	for _, line := range d.agentMetrics(node) {
		if v, ok := strings.CutPrefix(line, name+" "); ok {
			return v
		}
	}
	return "-"
}

// agentMetrics reads node's agent's metrics (served on 127.0.0.1:19478, as
// the agents the lab started with that address do), one line each.
func (d *l2Lab) agentMetrics(node string) []string {
	out, _ := exec.Command("ip", "netns", "exec", d.ns(node), "curl", "-s", "--max-time", "2", "http://127.0.0.1:19478/metrics").Output()
	return strings.Split(string(out), "\n")
}

// procWatch samples a process's CPU time and RSS once a second.
type procWatch struct {
	pid     int
	start   time.Time
	cpu0    float64
	maxRSS  int64 // kB
	done    chan struct{}
	stopped sync.WaitGroup
}

// phase is one phase's figures: CPU % of one core on average, RSS at most.
type phase struct {
	cpu    float64
	maxRSS int64
}

func (p phase) String() string {
	return fmt.Sprintf("CPU %5.1f%%, RSS %5.1f MiB", p.cpu, float64(p.maxRSS)/1024)
}

func watchProc(pid int) *procWatch {
	w := &procWatch{pid: pid, start: time.Now(), done: make(chan struct{})}
	w.cpu0, w.maxRSS = procSample(pid)
	w.stopped.Add(1)
	go func() {
		defer w.stopped.Done()
		tick := time.NewTicker(time.Second)
		defer tick.Stop()
		for {
			select {
			case <-w.done:
				return
			case <-tick.C:
			}
			if _, rss := procSample(pid); rss > w.maxRSS {
				w.maxRSS = rss
			}
		}
	}()
	return w
}

func (w *procWatch) stop() phase {
	close(w.done)
	w.stopped.Wait()
	cpu, rss := procSample(w.pid)
	if rss > w.maxRSS {
		w.maxRSS = rss
	}
	return phase{cpu: 100 * (cpu - w.cpu0) / time.Since(w.start).Seconds(), maxRSS: w.maxRSS}
}

// procSample reads a process's CPU seconds (user + system) and RSS (kB).
func procSample(pid int) (cpuSeconds float64, rssKB int64) {
	cpuSeconds = procmem.CPU(pid, false)
	if status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		for _, line := range strings.Split(string(status), "\n") {
			if v, ok := strings.CutPrefix(line, "VmRSS:"); ok {
				rssKB, _ = strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			}
		}
	}
	return cpuSeconds, rssKB
}
