package main

import (
	"bufio"
	"bytes"
	"fmt"
	"os/exec"
	"strings"
	"time"

	"github.com/coreos/go-iptables/iptables"

	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// benchBaseline writes the rules of n Services as a naive agent would: one go-iptables call per
// chain and per rule. To write exactly the same rules it lets the Dataplane write them once,
// reads them back with iptables-save, removes them with Cleanup, and times the replay.
func benchBaseline(backend string, n, extrapolateTo int) error {
	cfg := dataplane.Config{Family: dataplane.IPv4, Backend: backend}
	dp, err := dataplane.NewIPTables(cfg)
	if err != nil {
		return err
	}
	if _, err := dp.Sync(services(dataplane.IPv4, n), true); err != nil {
		return fmt.Errorf("baseline setup: %w", err)
	}
	dump, err := exec.Command("iptables-"+backend+"-save", "-t", "filter").Output()
	if err != nil {
		return err
	}
	nat, err := exec.Command("iptables-"+backend+"-save", "-t", "nat").Output()
	if err != nil {
		return err
	}
	dump = append(dump, nat...)
	if err := dataplane.Cleanup(cfg); err != nil {
		return err
	}
	ipt, err := iptables.New(iptables.IPFamily(iptables.ProtocolIPv4), iptables.Path("iptables-"+backend))
	if err != nil {
		return err
	}

	start := time.Now()
	calls, rules := 0, 0
	table := ""
	sc := bufio.NewScanner(bytes.NewReader(dump))
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "*"):
			table = line[1:]
		case strings.HasPrefix(line, ":VIPA-"):
			chain, _, _ := strings.Cut(line[1:], " ")
			if err := ipt.NewChain(table, chain); err != nil {
				return err
			}
			calls++
		case strings.HasPrefix(line, "-A "):
			args := dataplane.SplitRule(line)
			chain := args[1]
			switch {
			case strings.HasPrefix(chain, "VIPA-"):
				err = ipt.Append(table, chain, args[2:]...)
			case strings.Contains(line, "-j VIPA-"): // our jumps from built-in chains
				err = ipt.Insert(table, chain, 1, args[2:]...)
			default:
				continue
			}
			if err != nil {
				return fmt.Errorf("baseline %q: %w", line, err)
			}
			calls++
			rules++
		}
	}
	took := time.Since(start)
	perCall := took / time.Duration(calls)
	extrapolated := took * time.Duration(extrapolateTo) / time.Duration(n)
	fmt.Printf("%-8s IPv4 n=%-6d baseline, 1 go-iptables call per rule/chain: %9.1f ms  %7d rules %6d calls  %9.0f rules/s (%.2f ms/call)\n",
		backend, n, ms(took), rules, calls, float64(rules)/took.Seconds(), ms(perCall))
	line := fmt.Sprintf("%-8s IPv4 n=%-6d baseline extrapolated linearly from n=%d: %.1f s", backend, extrapolateTo, n, extrapolated.Seconds())
	if full, ok := measured[backend]["full (cold start)"]; ok {
		line += fmt.Sprintf("; full Sync measured %.1f ms, %.0fx faster", ms(full), float64(extrapolated)/float64(full))
	}
	if full, ok := measured[dataplane.PlaneNFTables]["full (cold start)"]; ok {
		line += fmt.Sprintf("; nftables plane %.1f ms, %.0fx faster", ms(full), float64(extrapolated)/float64(full))
	}
	fmt.Println(line + " (linear is generous to the baseline: per-call cost grows with the ruleset)")
	return nil
}
