//go:build root

package dataplane

import (
	"strings"
	"testing"
)

// These tests run the nftables plane against the kernel, each inside its own network namespace
// (see enterNetns in plane_test.go), and read back what it wrote with the nft tool.

func TestNFTables(t *testing.T) {
	for _, fam := range []Family{IPv4, IPv6} {
		t.Run(string(fam), func(t *testing.T) {
			enterNetns(t)
			testNFTables(t, fam)
		})
	}
}

// nftList is `nft list table` of our table of fam, "" when there is none.
func nftList(t *testing.T, fam Family) string {
	t.Helper()
	if !strings.Contains(cmd(t, "nft", "list", "tables"), nftFamily(fam)+" "+nftTableName) {
		return ""
	}
	return cmd(t, "nft", "list", "table", nftFamily(fam), nftTableName)
}

func nftFamily(fam Family) string {
	if fam == IPv6 {
		return "ip6"
	}
	return "ip"
}

func testNFTables(t *testing.T, fam Family) {
	f := fixtureFor(fam)
	ip := nftFamily(fam)
	nft := func(args ...string) string { return cmd(t, "nft", args...) }

	// Someone else's table, and iptables rules: left alone, and as they were after cleanup.
	nft("add", "table", ip, "someone-else")
	nft("add", "chain", ip, "someone-else", "c", "{ type nat hook prerouting priority dstnat; }")
	nft("add", "rule", ip, "someone-else", "c", ip, "daddr", f.vip, "counter")
	cmd(t, tool("nft", fam, ""), "-t", "nat", "-A", "PREROUTING", "-d", f.vip+f.bits, "-j", "RETURN")
	// Both mangle chains the planes jump from exist on such a node: iptables-nft creates a
	// built-in chain on first use and keeps it, empty, when our jump goes.
	cmd(t, tool("nft", fam, ""), "-t", "mangle", "-A", "PREROUTING", "-j", "RETURN")
	cmd(t, tool("nft", fam, ""), "-t", "mangle", "-A", "OUTPUT", "-j", "RETURN")
	before := nft("list", "ruleset")

	n, err := NewNFTables(Config{Family: fam})
	if err != nil {
		t.Fatal(err)
	}
	if n.Backend() != PlaneNFTables || n.Family() != fam {
		t.Fatalf("Backend %q Family %q", n.Backend(), n.Family())
	}
	if got := nft("list", "ruleset"); got != before {
		t.Fatalf("NewNFTables (its probe) changed the ruleset:\n%s", got)
	}
	if n.Healthy() {
		t.Error("Healthy before any Sync")
	}

	st, err := n.Sync(f.services(f.ep1, f.ep2), false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full || st.Rules != 22 || st.Elements != 7 || st.Chains != 12 {
		t.Errorf("first Sync: %+v, want a full one of 22 rules, 7 elements, 12 chains", st)
	}
	table := nftList(t, fam)
	for _, want := range []string{
		"type nat hook prerouting priority dstnat - 1;", // before iptables' and kube-proxy's nat
		"type nat hook output priority -101;",
		"type nat hook postrouting priority srcnat - 1;",
		"type filter hook forward priority filter - 1;",
		f.vip + " . tcp . 80 . 0x00000000 : " + f.ep1 + " . 8080",
		f.vip + " . tcp . 80 . 0x00000001 : " + f.ep2 + " . 8080",
		f.vip2 + " . udp . 53 . 0x00000000 : " + f.ep3 + " . 5353",
		"dnat " + ip + " to " + ip + " daddr . meta l4proto . th dport . numgen random mod 2 map @endpoints_2",
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if !n.Healthy() {
		t.Error("not Healthy after a full Sync")
	}

	// A partial Sync is a few elements and no rule.
	st, err = n.Sync(f.services(f.ep2), false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Full || st.Rules != 0 || st.Elements != 3 {
		t.Errorf("partial Sync: %+v, want 3 elements, no rule", st)
	}
	if table = nftList(t, fam); strings.Contains(table, f.ep1+" . 8080") || !strings.Contains(table, f.vip+" . tcp . 80 . 0x00000000 : "+f.ep2+" . 8080") {
		t.Errorf("after the partial Sync:\n%s", table)
	}
	if st, err = n.Sync(f.services(f.ep2), false); err != nil || st.Elements != 0 {
		t.Errorf("Sync without change: %+v %v, want nothing written", st, err)
	}

	// Drift: rules flushed or the table gone are noticed; elements flushed are not, but the
	// periodic full Sync rewrites them as well.
	for _, drift := range [][]string{
		{"flush", "chain", ip, nftTableName, nftServices},
		{"delete", "rule", ip, nftTableName, nftFilterForward, "handle", "HANDLE"},
		{"delete", "table", ip, nftTableName},
		{"flush", "map", ip, nftTableName, "MAP"},
	} {
		switch drift[len(drift)-1] { // names and handles change with every full Sync
		case "HANDLE":
			drift[len(drift)-1] = ruleHandle(t, fam, nftFilterForward)
		case "MAP":
			drift[len(drift)-1] = "endpoints_1_" + n.gen
		}
		nft(drift...)
		if healthy := n.Healthy(); healthy != (drift[0] == "flush" && drift[1] == "map") {
			t.Errorf("Healthy = %v after %q", healthy, drift)
		}
		if _, err := n.Sync(f.services(f.ep2), true); err != nil {
			t.Fatal(err)
		}
		if !n.Healthy() || !strings.Contains(nftList(t, fam), f.vip+" . tcp . 80 . 0x00000000 : "+f.ep2+" . 8080") {
			t.Errorf("not repaired after %q:\n%s", drift, nftList(t, fam))
		}
	}

	// Each full Sync wrote a new generation of the sets and deleted the old one; the clients
	// map has one generation.
	if table = nftList(t, fam); strings.Count(table, "\tset ") != 6 || strings.Count(table, "\tmap ") != 3 || strings.Contains(table, "_"+map[string]string{"a": "b", "b": "a"}[n.gen]+" {") {
		t.Errorf("sets of another generation than %q left:\n%s", n.gen, table)
	}

	// Handoffs stay in iptables, on the node's backend.
	testHandoffs(t, n, n.handoff.Backend(), fam)
	testReturnMarks(t, n, n.handoff.Backend(), fam)

	// A restarted agent replaces the table in its first (full) Sync.
	n2, err := NewNFTables(Config{Family: fam})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n2.Sync(f.services(f.ep1)[:1], false); err != nil { // dns went away meanwhile
		t.Fatal(err)
	}
	if table = nftList(t, fam); strings.Contains(table, f.vip2) || strings.Contains(table, f.ep2) {
		t.Errorf("elements of the last agent's Services are still there:\n%s", table)
	}

	// Cleanup removes our table and our iptables chains, twice over, and nothing else.
	for range 2 {
		if err := CleanupAll(Config{Family: fam}); err != nil {
			t.Fatal(err)
		}
		if after := nft("list", "ruleset"); after != before {
			t.Errorf("after CleanupAll:\n%s\nbefore the first Sync:\n%s", after, before)
		}
	}
}

// ruleHandle is the handle of the first rule of one of our chains.
func ruleHandle(t *testing.T, fam Family, chain string) string {
	out := cmd(t, "nft", "-a", "list", "chain", nftFamily(fam), nftTableName, chain)
	for _, line := range strings.Split(out, "\n") {
		if _, h, ok := strings.Cut(line, "# handle "); ok && !strings.Contains(line, "chain ") {
			return strings.TrimSpace(h)
		}
	}
	t.Fatalf("no rule in %s:\n%s", chain, out)
	return ""
}
