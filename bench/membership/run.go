package main

import (
	"bufio"
	"fmt"
	"math"
	"math/rand/v2"
	"net/netip"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/hashicorp/memberlist"

	"github.com/paas-org/vip-allocator-operator/internal/procmem"
	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
)

// scaleFactor stretches every tuned interval for the "scaled" preset.
const scaleFactor = 3

// benchKey is the shared key every member of the run uses (the cost of
// encryption is part of what is measured).
var benchKey = []byte("bench-membership-key-32-bytes!!!")

func presetTimers(set string) (membership.Timers, error) {
	t, err := undilatedTimers(set)
	return dilate(t, dilation()), err
}

func undilatedTimers(set string) (membership.Timers, error) {
	switch set {
	case "tuned":
		return tunedTimers()
	case "lan":
		return membership.TimersOf(memberlist.DefaultLANConfig()), nil
	case "scaled":
		t, err := tunedTimers()
		if err != nil {
			return t, err
		}
		t.ProbeInterval *= scaleFactor
		t.ProbeTimeout *= scaleFactor
		t.GossipInterval *= scaleFactor
		return t, nil
	}
	return membership.Timers{}, fmt.Errorf("unknown timers %q: want one of %v", set, timerSets)
}

// convergeLimit bounds the wait for a cluster to form; a size that cannot
// form on this machine within it is reported as such.
var convergeLimit = 4 * time.Minute

// tuneEnv carries -tune to the child processes.
const tuneEnv = "BENCH_MEMBERSHIP_TUNE"

// dilateEnv carries -dilate to the child processes.
const dilateEnv = "BENCH_MEMBERSHIP_DILATE"

// dilation is the -dilate factor: every timer of every preset is multiplied
// by it and every measured detection time divided by it. A member's work is
// driven by its timers, so a cluster dilated D times costs 1/D of the CPU per
// second and a simulation too big for this machine's cores in real time
// (2,000 members) runs without starving; the protocol's rounds keep their
// proportions, so detection measured in dilated time and divided by D is what
// the same cluster shows when every member has a core of its own. Processing
// delays (packets, encryption, the scheduler) shrink D times in the figure:
// the comparison at a size that fits undilated shows how much that matters.
func dilation() int {
	d, err := strconv.Atoi(os.Getenv(dilateEnv))
	if err != nil || d < 1 {
		return 1
	}
	return d
}

// dilate multiplies every duration of t by d.
func dilate(t membership.Timers, d int) membership.Timers {
	for _, v := range []*time.Duration{&t.ProbeInterval, &t.ProbeTimeout, &t.GossipInterval, &t.PushPullInterval, &t.TCPTimeout} {
		*v *= time.Duration(d)
	}
	return t
}

// tunedTimers are membership.TunedTimers with the -tune overrides, e.g.
// "ProbeInterval=150ms,SuspicionMult=3", to try other values.
func tunedTimers() (membership.Timers, error) {
	t := membership.TunedTimers()
	spec := os.Getenv(tuneEnv)
	if spec == "" {
		return t, nil
	}
	durations := map[string]*time.Duration{
		"ProbeInterval": &t.ProbeInterval, "ProbeTimeout": &t.ProbeTimeout, "GossipInterval": &t.GossipInterval,
		"PushPullInterval": &t.PushPullInterval, "TCPTimeout": &t.TCPTimeout,
	}
	ints := map[string]*int{
		"SuspicionMult": &t.SuspicionMult, "SuspicionMaxTimeoutMult": &t.SuspicionMaxTimeoutMult,
		"GossipNodes": &t.GossipNodes, "RetransmitMult": &t.RetransmitMult, "IndirectChecks": &t.IndirectChecks,
	}
	for _, kv := range strings.Split(spec, ",") {
		k, v, _ := strings.Cut(kv, "=")
		var err error
		if d, ok := durations[k]; ok {
			*d, err = time.ParseDuration(v)
		} else if n, ok := ints[k]; ok {
			*n, err = strconv.Atoi(v)
		} else {
			err = fmt.Errorf("unknown timer")
		}
		if err != nil {
			return t, fmt.Errorf("-tune %q: %w", kv, err)
		}
	}
	return t, nil
}

// result is one (size, timers) run, passed from the child process as JSON.
type result struct {
	Size   int
	Timers string
	// Converge is from the first Start until every member knows every other.
	Converge time.Duration
	// CPUPerMember is the share of one core each member used while idle (percent).
	CPUPerMember float64
	// RSSPerMember is the process RSS growth from the members, divided by their number (KiB).
	RSSPerMember float64
	Cases        []caseResult
	// FalseDeaths counts, by phase, declarations that a member is dead although it was never
	// killed; Refutes counts suspicions a healthy member had to refute. Both show overload.
	FalseDeaths string
	Refutes     int64
	// Dilation is the -dilate factor the times were measured with; they are already divided by it.
	Dilation int
	// Failure says why the cluster could not be measured (it did not form).
	Failure string `json:",omitempty"`
	// Errors counts memberlist's own error lines (failed sends, undecryptable packets).
	Errors int64
}

type caseResult struct {
	Way string // "shutdown" or "frozen"
	// First and All are, per kill, when the first and the last other member saw the victim gone.
	First, All []time.Duration
	// Missed counts observers that had not seen the death when the wait gave up.
	Missed int
}

// address of member i: 127.<run>.<i/250>.<1+i%250>, one port for all.
type addressing struct {
	octet byte
	port  int
}

func (a addressing) addr(i int) netip.Addr {
	return netip.AddrFrom4([4]byte{127, a.octet, byte(i / 250), byte(1 + i%250)})
}

// runOne measures one cluster size with one timer preset.
func runOne(size int, set string, kills int, frozen bool, idle time.Duration) (result, error) {
	timers, err := presetTimers(set)
	if err != nil {
		return result{}, err
	}
	res := result{Size: size, Timers: set, Dilation: dilation()}
	rssBefore, _ := procmem.Read("self")
	counter := &logCounter{}
	at := addressing{octet: byte(100 + rand.IntN(150)), port: 20000 + rand.IntN(20000)}

	// size-1 members stay up and observe; each kill adds one victim first,
	// so the cluster has size members while a death is being detected.
	observed := size - 1
	start := time.Now()
	members := make([]*membership.Cluster, observed)
	for i := range members {
		c, err := membership.Start(membership.Config{
			NodeName: memberName(i), BindAddr: at.addr(i), Port: at.port,
			Keys: [][]byte{benchKey}, Timers: timers, Log: counter.logger(),
		})
		if err != nil {
			return res, fmt.Errorf("start member %d: %w", i, err)
		}
		members[i] = c
	}
	defer func() {
		for _, c := range members {
			_ = c.Shutdown()
		}
	}()
	counter.phase.Store("join")
	formed := joinAll(members, at, counter)
	if formed == nil {
		formed = waitKnown(members, observed, convergeLimit, counter)
	}
	if formed != nil {
		// Not an error of the run: what this machine can simulate is a figure too.
		res.Failure = fmt.Sprintf("did not form in %v: %v", convergeLimit, formed)
		res.FalseDeaths, res.Refutes, res.Errors = counter.counts(), counter.refutes.Load(), counter.errors.Load()
		return res, nil
	}
	res.Converge = time.Since(start)
	fmt.Fprintf(os.Stderr, "  N=%d %s: %d members converged in %.1fs\n", size, set, observed, res.Converge.Seconds())

	counter.phase.Store("idle")
	rss, _ := procmem.Read("self")
	res.RSSPerMember = (rss - rssBefore) * 1024 / float64(observed)
	cpu0 := cpuTime()
	time.Sleep(idle)
	res.CPUPerMember = (cpuTime() - cpu0).Seconds() / idle.Seconds() / float64(observed) * 100

	counter.phase.Store("kills")
	obs := newObservers(members)
	defer obs.stop()
	ways := []string{"shutdown"}
	if frozen {
		ways = append(ways, "frozen")
	}
	limit := giveUpAfter(timers, size)
	seed := netip.AddrPortFrom(at.addr(0), uint16(at.port)).String()
	for w, way := range ways {
		cr := caseResult{Way: way}
		for k := 0; k < kills; k++ {
			name := fmt.Sprintf("victim-%s-%d", way, k)
			where := netip.AddrPortFrom(at.addr(observed+w*kills+k), uint16(at.port))
			var kill func()
			switch way {
			case "shutdown":
				c, err := membership.Start(membership.Config{
					NodeName: name, BindAddr: where.Addr(), Port: at.port,
					Keys: [][]byte{benchKey}, Timers: timers, Log: counter.logger(),
				})
				if err != nil {
					return res, fmt.Errorf("start %s: %w", name, err)
				}
				if _, err := c.Join([]string{seed}); err != nil {
					return res, fmt.Errorf("%s: %w", name, err)
				}
				kill = func() { _ = c.Shutdown() }
			case "frozen":
				proc, err := startVictimProcess(name, where, seed, set)
				if err != nil {
					return res, err
				}
				defer func() { _ = proc.Process.Kill(); _ = proc.Wait() }()
				kill = func() { _ = proc.Process.Signal(syscall.SIGSTOP) }
			}
			if err := waitKnownBy(members, name, 5*time.Minute); err != nil {
				return res, err
			}
			counter.killed(name)
			first, all, missed := obs.measure(name, limit, kill)
			first, all = first/time.Duration(res.Dilation), all/time.Duration(res.Dilation)
			cr.First, cr.All, cr.Missed = append(cr.First, first), append(cr.All, all), cr.Missed+missed
			fmt.Fprintf(os.Stderr, "  N=%d %s %s kill %d: first %.2fs, all %.2fs, missed %d\n",
				size, set, way, k+1, first.Seconds(), all.Seconds(), missed)
		}
		res.Cases = append(res.Cases, cr)
	}
	res.FalseDeaths, res.Refutes, res.Errors = counter.counts(), counter.refutes.Load(), counter.errors.Load()
	return res, nil
}

// giveUpAfter bounds the wait for a death to be seen: memberlist's longest
// suspicion timeout at this size (SuspicionMaxTimeoutMult * SuspicionMult *
// log10(n) probe intervals) plus ten probe rounds and half a minute of slack.
func giveUpAfter(t membership.Timers, n int) time.Duration {
	scale := max(1, math.Log10(float64(n)))
	longest := time.Duration(float64(t.SuspicionMaxTimeoutMult*t.SuspicionMult) * scale * float64(t.ProbeInterval))
	return longest + 10*t.ProbeInterval + 30*time.Second
}

func memberName(i int) string { return "member-" + strconv.Itoa(i) }

// joinAll joins every member through member 0.
func joinAll(members []*membership.Cluster, at addressing, counter *logCounter) error {
	var joined atomic.Int64
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Second):
				rss, _ := procmem.Read("self")
				fmt.Fprintf(os.Stderr, "  joining: %d of %d joined; refutes %d, false deaths %s, errors %d, RSS %.0f MiB\n",
					joined.Load(), len(members)-1, counter.refutes.Load(), counter.counts(), counter.errors.Load(), rss)
			}
		}
	}()
	// Joining everyone at once makes memberlist re-gossip every member to
	// every member at the same time (each joiner rebroadcasts all it
	// learns): in one process on two cores that starves the probes and ends
	// in a storm of false suspicions. Real agents join a few at a time, so
	// the run does too: waves, each settled before the next.
	seed := []string{netip.AddrPortFrom(at.addr(0), uint16(at.port)).String()}
	for first := 1; first < len(members); first += joinWave {
		wave := members[first:min(first+joinWave, len(members))]
		var wg sync.WaitGroup
		errs := make(chan error, len(wave))
		for i, c := range wave {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if _, err := c.Join(seed); err != nil {
					errs <- fmt.Errorf("member %d join: %w", first+i, err)
				}
				joined.Add(1)
			}()
		}
		wg.Wait()
		close(errs)
		if err := <-errs; err != nil {
			return err
		}
		known := first + len(wave)
		if err := waitKnown(members[:1], known, convergeLimit, counter); err != nil {
			return err
		}
		// A wave member that pulled member 0's state before its wave mates
		// had joined hears of them only by gossip sent before it was known,
		// or at the next push/pull: pull again, as an agent re-joining does.
		for _, c := range wave {
			if len(c.Members()) < known {
				if _, err := c.Join(seed); err != nil {
					return fmt.Errorf("rejoin: %w", err)
				}
			}
		}
		if err := waitKnown(append([]*membership.Cluster{members[0]}, wave...), known, convergeLimit, counter); err != nil {
			return err
		}
	}
	return nil
}

// joinWave is how many members join at a time.
const joinWave = 20

// waitKnown waits until each member knows want members. Each is checked
// until it is done, then never again, so polling costs O(N) copies per pass.
func waitKnown(members []*membership.Cluster, want int, limit time.Duration, counter *logCounter) error {
	deadline := time.Now().Add(limit)
	progress := time.Now().Add(10 * time.Second)
	for i, c := range members {
		for len(c.Members()) < want {
			if time.Now().After(progress) {
				progress = time.Now().Add(10 * time.Second)
				rss, _ := procmem.Read("self")
				fmt.Fprintf(os.Stderr, "  converging: member %d of %d knows %d; refutes %d, false deaths %s, errors %d, RSS %.0f MiB\n",
					i, len(members), len(c.Members()), counter.refutes.Load(), counter.counts(), counter.errors.Load(), rss)
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("member %d knows %d of %d members after %v", i, len(c.Members()), want, limit)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	return nil
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// startVictimProcess starts a member in a process of its own (this
// command with -victim), so that SIGSTOP freezes it and nothing else.
func startVictimProcess(name string, where netip.AddrPort, seed, set string) (*exec.Cmd, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("find own executable: %w", err)
	}
	cmd := exec.Command(self, "-victim", name+"@"+where.String(), "-join", seed, "-victim-timers", set)
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the run
	out, err := cmd.StdoutPipe()
	if err != nil {
		return nil, fmt.Errorf("victim %s: %w", name, err)
	}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("victim %s: %w", name, err)
	}
	if line, err := bufio.NewReader(out).ReadString('\n'); err != nil || line != "ready\n" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		return nil, fmt.Errorf("victim %s did not start: %q %v", name, line, err)
	}
	return cmd, nil
}

// waitKnownBy waits until every member knows name.
func waitKnownBy(members []*membership.Cluster, name string, limit time.Duration) error {
	deadline := time.Now().Add(limit)
	for i, c := range members {
		for {
			if _, ok := c.Members()[name]; ok {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("%s not known to member %d after %v", name, i, limit)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	return nil
}

// runVictim is the frozen case's member process: it joins and then waits to be stopped.
func runVictim(spec, join, set string) {
	timers, err := presetTimers(set)
	if err != nil {
		fatal(err)
	}
	name, where, _ := strings.Cut(spec, "@")
	ap, err := netip.ParseAddrPort(where)
	if err != nil {
		fatal(fmt.Errorf("-victim %q: %w", spec, err))
	}
	c, err := membership.Start(membership.Config{NodeName: name, BindAddr: ap.Addr(), Port: int(ap.Port()), Keys: [][]byte{benchKey}, Timers: timers})
	if err != nil {
		fatal(err)
	}
	if _, err := c.Join([]string{join}); err != nil {
		fatal(err)
	}
	fmt.Println("ready")
	select {}
}

// observers watch every member's Changed signal and note when a victim disappears.
type observers struct {
	members []*membership.Cluster
	watch   atomic.Pointer[watch]
	done    chan struct{}
	wg      sync.WaitGroup
}

type watch struct {
	victim  string
	seen    []atomic.Int64 // per member: UnixNano when it saw the victim gone, 0 = not yet
	pending atomic.Int64
	allSeen chan struct{}
}

func newObservers(members []*membership.Cluster) *observers {
	o := &observers{members: members, done: make(chan struct{})}
	for i, c := range members {
		o.wg.Add(1)
		go func() {
			defer o.wg.Done()
			for {
				select {
				case <-o.done:
					return
				case <-c.Changed():
				}
				now := time.Now().UnixNano() // before the O(N) copy in Members
				w := o.watch.Load()
				if w == nil || w.seen[i].Load() != 0 {
					continue
				}
				if _, ok := c.Members()[w.victim]; !ok && w.seen[i].CompareAndSwap(0, now) {
					if w.pending.Add(-1) == 0 {
						close(w.allSeen)
					}
				}
			}
		}()
	}
	return o
}

func (o *observers) stop() { close(o.done); o.wg.Wait() }

// measure kills with kill() and returns when the first and the last
// member saw the victim gone, and how many had not when limit passed.
func (o *observers) measure(victim string, limit time.Duration, kill func()) (first, all time.Duration, missed int) {
	w := &watch{victim: victim, seen: make([]atomic.Int64, len(o.members)), allSeen: make(chan struct{})}
	w.pending.Store(int64(len(o.members)))
	t0 := time.Now()
	o.watch.Store(w)
	kill()
	select {
	case <-w.allSeen:
	case <-time.After(limit):
	}
	o.watch.Store(nil)
	var times []time.Duration
	for i := range o.members {
		if at := w.seen[i].Load(); at > 0 {
			times = append(times, time.Duration(at-t0.UnixNano()))
		} else {
			missed++
		}
	}
	if len(times) == 0 {
		return limit, limit, missed
	}
	sort.Slice(times, func(a, b int) bool { return times[a] < times[b] })
	all = times[len(times)-1]
	if missed > 0 {
		all = limit
	}
	return times[0], all, missed
}
