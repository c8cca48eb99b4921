package main

import (
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

func median(ds []time.Duration) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(a, b int) bool { return s[a] < s[b] })
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func worst(ds []time.Duration) time.Duration {
	var w time.Duration
	for _, d := range ds {
		w = max(w, d)
	}
	return w
}

func secs(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

func printResult(w io.Writer, r result) {
	if r.Failure != "" {
		fmt.Fprintf(w, "  N=%d %s: %s\n", r.Size, r.Timers, r.Failure)
		return
	}
	fmt.Fprintf(w, "  N=%d %s: converged %.1fs, CPU %.3f%% of a core and %.0f KiB RSS per member, false deaths %s, refutes %d, errors %d\n",
		r.Size, r.Timers, r.Converge.Seconds(), r.CPUPerMember, r.RSSPerMember, r.FalseDeaths, r.Refutes, r.Errors)
	for _, c := range r.Cases {
		fmt.Fprintf(w, "  N=%d %s %s: all members saw it: median %s worst %s; first member: median %s; missed %d\n",
			r.Size, r.Timers, c.Way, secs(median(c.All)), secs(worst(c.All)), secs(median(c.First)), c.Missed)
	}
}

// printTable prints every run, then the baseline ratio per size and way of dying.
func printTable(results []result) {
	w := os.Stdout
	load, _ := os.ReadFile("/proc/loadavg")
	fmt.Fprintf(w, "\nbench-membership: detection of a dead member as seen by every other member, all members in one process on loopback\n")
	fmt.Fprintf(w, "(load average at the end: %s)\n", strings.TrimSpace(string(load)))
	if len(results) > 0 && results[0].Dilation > 1 {
		d := results[0].Dilation
		fmt.Fprintf(w, "(dilated: every timer %dx slower, detection times divided by %d; CPU%%/mbr is at the dilated rate, about 1/%d of real time)\n", d, d, d)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "%6s %-7s %-9s %6s %10s %10s %12s %7s %9s %10s %9s %8s  %s\n",
		"N", "timers", "way", "kills", "all:median", "all:worst", "first:median", "missed",
		"converge", "CPU%/mbr", "KiB/mbr", "refutes", "false deaths by phase")
	for _, r := range results {
		if r.Failure != "" {
			fmt.Fprintf(w, "%6d %-7s %s (refutes %d, false deaths %s)\n", r.Size, r.Timers, r.Failure, r.Refutes, r.FalseDeaths)
		}
		for _, c := range r.Cases {
			fmt.Fprintf(w, "%6d %-7s %-9s %6d %10s %10s %12s %7d %8.1fs %10.3f %9.0f %8d  %s\n",
				r.Size, r.Timers, c.Way, len(c.All), secs(median(c.All)), secs(worst(c.All)), secs(median(c.First)),
				c.Missed, r.Converge.Seconds(), r.CPUPerMember, r.RSSPerMember, r.Refutes, r.FalseDeaths)
		}
	}
	fmt.Fprintf(w, "\nratio baseline (memberlist DefaultLANConfig) / ours, detection by all members (higher = ours faster):\n")
	for _, ours := range results {
		if ours.Timers == "lan" {
			continue
		}
		for _, base := range results {
			if base.Timers != "lan" || base.Size != ours.Size {
				continue
			}
			for _, oc := range ours.Cases {
				for _, bc := range base.Cases {
					if bc.Way != oc.Way || median(oc.All) == 0 || worst(oc.All) == 0 {
						continue
					}
					fmt.Fprintf(w, "  N=%-5d %-7s %-9s median %5.1fx (%s vs %s)   worst %5.1fx (%s vs %s)\n",
						ours.Size, ours.Timers, oc.Way,
						median(bc.All).Seconds()/median(oc.All).Seconds(), secs(median(bc.All)), secs(median(oc.All)),
						worst(bc.All).Seconds()/worst(oc.All).Seconds(), secs(worst(bc.All)), secs(worst(oc.All)))
				}
			}
		}
	}
}
