// Command membership is 'make bench-membership': how long the agents' liveness layer
// (nodeagent/membership) takes to declare a dead member dead, as seen by every other member,
// with our tuned timers against memberlist's DefaultLANConfig timers (the baseline) in the
// same run.
//
// All members of a cluster run in one process on loopback (each on its own 127.x.y.z
// address, with the real UDP/TCP transport and AES-GCM keyring). Each (size, timers) pair
// runs in a fresh child process, so CPU time and RSS are its own. Two ways to die:
//
//   - shutdown: a member stops without leaving (what an agent crash looks like: its sockets
//     close, TCP connects are refused);
//   - frozen: the member runs in its own process, which gets SIGSTOP: its sockets stay open
//     but nothing answers, as when a node hangs or its link goes down. No root needed.
//
// Per kill the detection time is taken from the kill until each other member's
// Changed() signal shows the victim gone; "all" is the last member to see it.
package main

import (
	"bufio"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/procmem"
)

// timerSets are the timer presets a run can use; "lan" is the baseline.
var timerSets = []string{"tuned", "lan", "scaled"}

func main() {
	sizes := flag.String("sizes", "3,50,500,2000", "cluster sizes")
	sets := flag.String("timers", "tuned,lan", "timer presets to compare: tuned, lan (memberlist.DefaultLANConfig), scaled (tuned x"+strconv.Itoa(scaleFactor)+", for large clusters)")
	kills := flag.Int("kills", 5, "kills per size, timers and way of dying")
	frozen := flag.Bool("frozen", true, "also freeze members (SIGSTOP of a member process) besides shutting them down")
	idle := flag.Duration("idle", 10*time.Second, "steady-state window over which CPU per member is measured")
	// Child modes, used by the command itself.
	one := flag.String("one", "", "internal: run one size,timers pair and print its result as JSON")
	victim := flag.String("victim", "", "internal: run one member name@addr:port joining -join, for the frozen case")
	join := flag.String("join", "", "internal: the member the victim joins")
	timers := flag.String("victim-timers", "tuned", "internal: the victim's timer preset")
	flag.DurationVar(&convergeLimit, "converge-limit", convergeLimit, "give up on a size whose cluster has not formed by then")
	tune := flag.String("tune", "", "override tuned timers, e.g. ProbeInterval=150ms,SuspicionMult=3 (field names of membership.Timers)")
	dilateBy := flag.Int("dilate", 1, "run every timer this many times slower and divide the detection times by it (to simulate clusters too big for this machine's cores in real time)")
	maxRSS := flag.Int("max-rss", 8192, "MiB: a simulation whose process grows past this stops (the members' state grows with N squared; the machine is shared)")
	cpuProfile := flag.String("cpuprofile", "", "write a CPU profile of a -one run to this file")
	flag.Parse()

	if *tune != "" {
		os.Setenv(tuneEnv, *tune) // children inherit it
	}
	if *dilateBy > 1 {
		os.Setenv(dilateEnv, strconv.Itoa(*dilateBy))
	}
	if *victim != "" {
		runVictim(*victim, *join, *timers)
		return
	}
	if *one != "" {
		// The members of a whole cluster share one heap here, where a real
		// agent has its own: fewer collections keep GC from dominating.
		debug.SetGCPercent(400)
		go guardRSS(float64(*maxRSS))
		n, set, _ := strings.Cut(*one, ",")
		size, err := strconv.Atoi(n)
		if err != nil {
			fatal(fmt.Errorf("-one %q: %w", *one, err))
		}
		if *cpuProfile != "" {
			f, err := os.Create(*cpuProfile)
			if err != nil {
				fatal(err)
			}
			if err := pprof.StartCPUProfile(f); err != nil {
				fatal(err)
			}
			defer pprof.StopCPUProfile()
			go func() { // an interrupted run still writes its profile
				sig := make(chan os.Signal, 1)
				signal.Notify(sig, os.Interrupt)
				<-sig
				pprof.StopCPUProfile()
				os.Exit(130)
			}()
		}
		res, err := runOne(size, set, *kills, *frozen, *idle)
		if err != nil {
			fatal(err)
		}
		if err := json.NewEncoder(os.Stdout).Encode(res); err != nil {
			fatal(err)
		}
		return
	}

	fmt.Fprintf(os.Stderr, "bench-membership: GOMAXPROCS=%d, %d CPUs\n", runtime.GOMAXPROCS(0), runtime.NumCPU())
	var results []result
	for _, s := range strings.Split(*sizes, ",") {
		for _, set := range strings.Split(*sets, ",") {
			fmt.Fprintf(os.Stderr, "bench-membership: N=%s timers=%s ...\n", s, set)
			res, err := runChild(s, set, *kills, *frozen, *idle)
			if err != nil {
				fmt.Fprintf(os.Stderr, "bench-membership: N=%s timers=%s: %v\n", s, set, err)
				continue
			}
			results = append(results, res)
			printResult(os.Stderr, res) // progress, the table comes at the end
		}
	}
	printTable(results)
}

// runChild runs one (size, timers) pair in a fresh process of this command.
func runChild(size, set string, kills int, frozen bool, idle time.Duration) (result, error) {
	self, err := os.Executable()
	if err != nil {
		return result{}, fmt.Errorf("find own executable: %w", err)
	}
	cmd := exec.Command(self, "-one", size+","+set, "-kills", strconv.Itoa(kills), "-converge-limit", convergeLimit.String(),
		"-max-rss", flag.Lookup("max-rss").Value.String(),
		"-frozen="+strconv.FormatBool(frozen), "-idle", idle.String())
	cmd.Stderr = os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL} // never outlive the run
	out, err := cmd.Output()
	if err != nil {
		return result{}, fmt.Errorf("run child: %w", err)
	}
	var res result
	sc := bufio.NewScanner(strings.NewReader(string(out)))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() { // the last JSON line is the result
		if err := json.Unmarshal(sc.Bytes(), &res); err != nil {
			return result{}, fmt.Errorf("decode child result %q: %w", sc.Text(), err)
		}
	}
	return res, nil
}

// guardRSS ends a simulation that outgrows limit MiB before it takes the
// machine's memory: every member holds the state of every other, so the
// process grows with N squared (about 10 GiB for 1,700 members).
func guardRSS(limit float64) {
	for range time.Tick(time.Second) {
		if rss, _ := procmem.Read("self"); rss > limit {
			fatal(fmt.Errorf("the simulation outgrew -max-rss: %.0f MiB RSS", rss))
		}
	}
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "bench-membership:", err)
	os.Exit(1)
}
