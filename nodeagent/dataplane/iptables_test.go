//go:build root

package dataplane

import (
	"strings"
	"testing"
)

// These tests run the iptables plane against both iptables backends, each inside its own
// network namespace (see enterNetns in plane_test.go), and read back what it wrote with
// iptables-save.

func TestIPTables(t *testing.T) {
	for _, backend := range []string{"nft", "legacy"} {
		for _, fam := range []Family{IPv4, IPv6} {
			t.Run(backend+"/"+string(fam), func(t *testing.T) {
				enterNetns(t)
				testIPTables(t, backend, fam)
			})
		}
	}
}

// foreignRules are someone else's rules (iptables arguments) in every
// built-in chain the data plane jumps from.
func foreignRules(f fixture) [][]string {
	return [][]string{
		{"-t", "filter", "-N", "KUBE-FOO"},
		{"-t", "filter", "-A", "KUBE-FOO", "-j", "RETURN"},
		{"-t", "filter", "-A", "INPUT", "-s", f.ep3 + f.bits, "-j", "KUBE-FOO"},
		{"-t", "filter", "-A", "FORWARD", "-j", "KUBE-FOO"},
		{"-t", "filter", "-A", "OUTPUT", "-j", "KUBE-FOO"},
		{"-t", "nat", "-A", "PREROUTING", "-d", f.vip + f.bits, "-j", "RETURN"},
		{"-t", "nat", "-A", "OUTPUT", "-j", "RETURN"},
		{"-t", "nat", "-A", "POSTROUTING", "-j", "RETURN"},
		{"-t", "mangle", "-A", "PREROUTING", "-j", "RETURN"},
	}
}

func testIPTables(t *testing.T, backend string, fam Family) {
	f := fixtureFor(fam)
	ipt := func(args ...string) string { return cmd(t, tool(backend, fam, ""), args...) }
	cfg := Config{Family: fam, Backend: backend}
	webChain := svcChainName("default", "web", Port{Name: "http", Protocol: TCP}, fam)
	dnsChain := svcChainName("kube-system", "dns", Port{Name: "dns", Protocol: UDP}, fam)

	// Someone else's rules, in every built-in chain we jump from: ours go first, theirs stay.
	for _, r := range foreignRules(f) {
		ipt(r...)
	}
	before := save(t, backend, fam)

	d, err := NewIPTables(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if d.Backend() != backend || d.Family() != fam {
		t.Fatalf("Backend %q Family %q, want %q %q", d.Backend(), d.Family(), backend, fam)
	}
	if d.Healthy() {
		t.Error("Healthy before any Sync")
	}

	// Full sync.
	st, err := d.Sync(f.services(f.ep1, f.ep2), false)
	if err != nil {
		t.Fatal(err)
	}
	if !st.Full || st.Rules == 0 {
		t.Errorf("first Sync: %+v, want a full one", st)
	}
	for _, j := range jumps {
		r := rulesOf(saveTable(t, backend, fam, j.table), j.from)
		if len(r) != 2 || !strings.HasSuffix(r[0], "-j "+j.to) || !strings.Contains(r[0], "vip-allocator") {
			t.Errorf("%s/%s: our jump is not first before theirs: %q", j.table, j.from, r)
		}
	}
	dump := save(t, backend, fam)
	web := rulesOf(dump, webChain)
	if len(web) != 3 || !strings.HasSuffix(web[2], "-j DNAT --to-destination "+f.dest(f.ep2, "8080")) ||
		!strings.Contains(web[1], "statistic") || !strings.HasSuffix(web[0], "-j "+chainMasq) {
		t.Errorf("%s: %q", webChain, web)
	}
	if r := rulesOf(dump, chainServices); len(r) != 2 {
		t.Errorf("%s: %q", chainServices, r)
	}
	if r := rulesOf(dump, chainFilter); len(r) != 7 || !strings.Contains(r[0], "UNTRACKED -j RETURN") ||
		!strings.Contains(r[1], "-d "+f.vip+f.bits) || !strings.Contains(r[1], "REJECT") {
		t.Errorf("%s: %q", chainFilter, r)
	}
	if r := rulesOf(dump, chainPost); len(r) != 3 || !strings.Contains(r[2], "MASQUERADE --random-fully") {
		t.Errorf("%s: %q", chainPost, r)
	}
	if !d.Healthy() {
		t.Error("not Healthy after a full Sync")
	}

	// Partial sync: web loses an endpoint. Markers show which chains were rewritten:
	// a rewritten chain loses the marker appended to it.
	for _, c := range []string{webChain, dnsChain, chainServices} {
		ipt("-t", "nat", "-A", c, "-m", "comment", "--comment", "marker", "-j", "RETURN")
	}
	st, err = d.Sync(f.services(f.ep2), false)
	if err != nil {
		t.Fatal(err)
	}
	if st.Full || st.Chains != 1 || st.Rules != 2 {
		t.Errorf("partial Sync: %+v, want 1 chain, 2 rules", st)
	}
	dump = save(t, backend, fam)
	if web := rulesOf(dump, webChain); len(web) != 2 || !strings.Contains(web[1], f.dest(f.ep2, "8080")) {
		t.Errorf("%s after partial Sync: %q", webChain, web)
	}
	for _, c := range []string{dnsChain, chainServices} {
		if r := rulesOf(dump, c); !strings.Contains(r[len(r)-1], "marker") {
			t.Errorf("partial Sync rewrote %s, which did not change: %q", c, r)
		}
	}
	if st, err = d.Sync(f.services(f.ep2), false); err != nil || st.Rules != 0 {
		t.Errorf("Sync without change: %+v %v, want nothing written", st, err)
	}

	// Drift: a jump or the canary goes; Healthy notices and a full Sync repairs.
	for _, drift := range [][]string{
		{"-t", "nat", "-D", "PREROUTING", "-m", "comment", "--comment", "vip-allocator service VIPs", "-j", chainServices},
		{"-t", "filter", "-D", "FORWARD", "-m", "comment", "--comment", "vip-allocator service VIPs", "-j", chainFilter},
		{"-t", "nat", "-F", chainCanary},
	} {
		ipt(drift...)
		if d.Healthy() {
			t.Errorf("Healthy after %q", drift)
		}
		if _, err := d.Sync(f.services(f.ep2), true); err != nil {
			t.Fatal(err)
		}
		if !d.Healthy() {
			t.Errorf("not Healthy after a full Sync repairing %q", drift)
		}
	}
	if r := rulesOf(saveTable(t, backend, fam, "nat"), "PREROUTING"); !strings.HasSuffix(r[0], "-j "+chainServices) || len(r) != 2 {
		t.Errorf("PREROUTING after repair: %q", r)
	}

	// A full Sync deletes stale VIPA- chains, even ones it never wrote; a partial Sync deletes
	// the chains of a Service that went away.
	ipt("-t", "nat", "-N", "VIPA-SVC-STALESTALESTALE")
	ipt("-t", "nat", "-A", "VIPA-SVC-STALESTALESTALE", "-j", chainMasq)
	ipt("-t", "filter", "-N", "VIPA-OLD")
	if _, err := d.Sync(f.services(f.ep2), true); err != nil {
		t.Fatal(err)
	}
	if _, err := d.Sync(f.services(f.ep2)[:1], false); err != nil { // dns goes away
		t.Fatal(err)
	}
	dump = save(t, backend, fam)
	for _, c := range []string{"VIPA-SVC-STALESTALESTALE", "VIPA-OLD", dnsChain} {
		if strings.Contains(dump, c) {
			t.Errorf("stale chain %s is still there:\n%s", c, dump)
		}
	}

	testHandoffs(t, d, backend, fam)
	testReturnMarks(t, d, backend, fam)

	// A restarted agent (new Dataplane) starts with a full Sync and finds the old chains.
	d2, err := NewIPTables(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := d2.Sync(nil, false); err != nil {
		t.Fatal(err)
	}
	if dump = save(t, backend, fam); strings.Contains(dump, webChain) {
		t.Errorf("chain of a Service gone while the agent was down is still there:\n%s", dump)
	}
	if _, err := d2.Sync(f.services(f.ep1, f.ep2), false); err != nil {
		t.Fatal(err)
	}

	// Cleanup leaves iptables as it found it, twice over.
	for range 2 {
		if err := Cleanup(cfg); err != nil {
			t.Fatal(err)
		}
		if after := save(t, backend, fam); after != before {
			t.Errorf("after Cleanup:\n%s\nbefore the first Sync:\n%s", after, before)
		}
	}
}

// TestFailedRestoreForcesFullSync: a payload iptables refuses leaves the Dataplane unhealthy
// and the next Sync full.
func TestFailedRestoreForcesFullSync(t *testing.T) {
	enterNetns(t)
	d, err := NewIPTables(Config{Family: IPv4, Backend: "nft"})
	if err != nil {
		t.Fatal(err)
	}
	f := fixtureFor(IPv4)
	if _, err := d.Sync(f.services(f.ep1), true); err != nil {
		t.Fatal(err)
	}
	// Someone else jumps to web's chain: the partial Sync that deletes it must fail.
	webChain := svcChainName("default", "web", Port{Name: "http", Protocol: TCP}, IPv4)
	cmd(t, "iptables-nft", "-t", "nat", "-A", "PREROUTING", "-j", webChain)
	_, err = d.Sync(f.services(), false)
	if err == nil || !strings.Contains(err.Error(), "line") {
		t.Fatalf("Sync deleting a chain in use: %v, want an error naming the line", err)
	}
	if d.Healthy() {
		t.Error("Healthy after a failed Sync")
	}
	cmd(t, "iptables-nft", "-t", "nat", "-D", "PREROUTING", "-j", webChain)
	st, err := d.Sync(f.services(), false)
	if err != nil || !st.Full {
		t.Errorf("Sync after a failure: %+v %v, want a full one", st, err)
	}
}

func TestBackendDetection(t *testing.T) {
	for _, tc := range []struct {
		desc  string
		setup [][]string
		want  string
	}{
		{desc: "nothing anywhere: nft", want: "nft"},
		{desc: "kubelet's hint in legacy mangle", want: "legacy", setup: [][]string{{"iptables-legacy", "-t", "mangle", "-N", "KUBE-IPTABLES-HINT"}}},
		{desc: "kubelet's canary in nft mangle beats more legacy rules", want: "nft", setup: [][]string{
			{"iptables-nft", "-t", "mangle", "-N", "KUBE-KUBELET-CANARY"},
			{"iptables-legacy", "-A", "INPUT", "-j", "ACCEPT"},
		}},
		{desc: "no hint, more legacy rules", want: "legacy", setup: [][]string{{"ip6tables-legacy", "-A", "INPUT", "-j", "ACCEPT"}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			enterNetns(t)
			for _, c := range tc.setup {
				cmd(t, c[0], c[1:]...)
			}
			d, err := NewIPTables(Config{Family: IPv4})
			if err != nil {
				t.Fatal(err)
			}
			if d.Backend() != tc.want {
				t.Errorf("Backend() = %q, want %q", d.Backend(), tc.want)
			}
		})
	}
}
