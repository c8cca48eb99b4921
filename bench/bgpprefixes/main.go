// Command bgpprefixes is 'make bench-bgp-prefixes': what a router that sends a node a full
// table costs that node's BGP speaker in memory. A router (a GoBGP server) sends -prefixes
// IPv6 routes (2001:db8::/32 /64s) to one speaker, each in its own network namespace joined by a
// veth; the speaker runs in a process of its own, so its RSS and heap are its own. Three
// speakers, one per run, in the same invocation:
//
//   - accept-all: a bare GoBGP server with its default configuration (the baseline): every route
//     in the adj-rib-in and the RIB;
//   - reject-all: a bare GoBGP server whose global import policy rejects everything (an import
//     policy without a prefix limit): the routes stay out of the RIB, but GoBGP keeps them in
//     the peer's adj-rib-in all the same;
//   - agent: the agent's speaker (nodeagent/bgp), which rejects every route and closes a
//     session whose router sends more than its prefix limit.
//
// For each it prints the growth, over the idle speaker, of the peak RSS (VmHWM), of the RSS
// and the live heap (after a GC) once the routes were received or the session closed, and the
// ratios of the baseline's growth to each; then it checks that the agent's speaker connects
// again after its restart delay (shortened here) and closes the session again. It needs root (network namespaces), which it deletes
// whatever happens.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"time"
)

// modes are the speakers measured, the baseline first.
var modes = []string{modeAcceptAll, modeRejectAll, modeAgent}

const (
	modeAcceptAll = "accept-all"
	modeRejectAll = "reject-all"
	modeAgent     = "agent"
)

// The lab's addresses: the router and the node, on either end of a veth.
const (
	routerAddr = "2001:db8::1"
	nodeAddr   = "2001:db8::2"
	routerASN  = 64512
	nodeASN    = 64513
)

// result is what a speaker process reports, in MiB (routes: in its adj-rib-in at the end).
type result struct {
	Mode         string  `json:"mode"`
	Routes       int     `json:"routes"`
	Limited      bool    `json:"limited"`
	PeakRSS      float64 `json:"peakRSS"`
	RSS          float64 `json:"rss"`
	Heap         float64 `json:"heap"`
	Seconds      float64 `json:"seconds"`
	BeforeRSS    float64 `json:"beforeRSS"`
	BeforeHeap   float64 `json:"beforeHeap"`
	SessionError string  `json:"sessionError,omitempty"`
	// Restarted: when (seconds from the start) the agent's speaker had connected again after
	// its restart delay and closed the session again over the limit.
	Restarted float64 `json:"restarted,omitempty"`
}

func main() {
	prefixes := flag.Int("prefixes", 100000, "routes the router sends")
	timeout := flag.Duration("timeout", 5*time.Minute, "give up on a speaker that has not received them all (or closed the session) by then")
	role := flag.String("role", "", "internal: router or speaker")
	mode := flag.String("mode", "", "internal: the speaker's mode")
	flag.StringVar(&memProfile, "memprofile", "", "write each speaker's heap profile, once measured, to this file with the mode appended")
	flag.Parse()
	var err error
	switch *role {
	case "router":
		err = runRouter(*prefixes)
	case "speaker":
		var r result
		if r, err = runSpeaker(*mode, *prefixes, *timeout); err == nil {
			err = json.NewEncoder(os.Stdout).Encode(r)
		}
	default:
		err = run(*prefixes, *timeout)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "bgpprefixes:", err)
		os.Exit(1)
	}
}

// run measures every mode, each in a lab of its own, and prints the table and the ratios.
func run(prefixes int, timeout time.Duration) error {
	if os.Geteuid() != 0 {
		return fmt.Errorf("needs root: it builds network namespaces")
	}
	fmt.Printf("a router sends %d IPv6 routes to one speaker; growth over the idle speaker, MiB\n", prefixes)
	fmt.Printf("%-11s %9s %8s %9s %9s %9s %8s\n", "speaker", "routes", "closed", "peak RSS", "RSS", "heap", "seconds")
	var results []result
	for _, m := range modes {
		r, err := measure(m, prefixes, timeout)
		if err != nil {
			return fmt.Errorf("%s: %w", m, err)
		}
		results = append(results, r)
		routes := "-" // the agent's speaker does not expose its adj-rib-in
		if r.Routes >= 0 {
			routes = fmt.Sprint(r.Routes)
		}
		fmt.Printf("%-11s %9s %8v %9.1f %9.1f %9.1f %8.1f\n", r.Mode, routes, r.Limited,
			r.PeakRSS-r.BeforeRSS, r.RSS-r.BeforeRSS, r.Heap-r.BeforeHeap, r.Seconds)
	}
	base := results[0]
	for _, r := range results[1:] {
		fmt.Printf("ratio %s/%s: peak RSS growth %s, live heap growth %s\n", base.Mode, r.Mode,
			ratio(base.PeakRSS-base.BeforeRSS, r.PeakRSS-r.BeforeRSS), ratio(base.Heap-base.BeforeHeap, r.Heap-r.BeforeHeap))
	}
	agent := results[len(results)-1]
	if !agent.Limited {
		return fmt.Errorf("the agent's speaker did not close the session over its prefix limit (%d routes sent)", prefixes)
	}
	fmt.Printf("the agent's speaker closed the session at %.1f s, connected again after its restart delay (%s here), and closed it again at %.1f s\n",
		agent.Seconds, restartAfter, agent.Restarted)
	return nil
}

// ratio is a/b, with growths under 1 MiB counted as 1 MiB: the noise of a GC cycle.
func ratio(a, b float64) string {
	return fmt.Sprintf("%.1fx", max(a, 1)/max(b, 1))
}
