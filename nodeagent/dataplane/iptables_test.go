package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane/netnstest"
)

// These tests run real iptables, each subtest inside its own fresh network namespace (its
// goroutine's thread is moved there), so the host's rules are never touched.

// enterNetns moves the calling test goroutine into a new network namespace, deleted when the
// test ends, failed or not.
func enterNetns(t *testing.T) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	_, leave, err := netnstest.Enter("vipa-dp-test")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := leave(); err != nil {
			t.Error(err)
		}
	})
}

// cmd runs a command in the test's namespace and fails the test if it fails.
func cmd(t *testing.T, name string, args ...string) string {
	t.Helper()
	out, err := exec.Command(name, args...).CombinedOutput()
	if err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
	return string(out)
}

// tool names a binary of the backend and family: tool("legacy", IPv6, "-save").
func tool(backend string, fam Family, suffix string) string {
	if fam == IPv6 {
		return "ip6tables-" + backend + suffix
	}
	return "iptables-" + backend + suffix
}

// save is iptables-save of tables filter and nat without its '#' comment lines.
func save(t *testing.T, backend string, fam Family) string {
	t.Helper()
	return saveTable(t, backend, fam, "filter") + saveTable(t, backend, fam, "nat") + saveTable(t, backend, fam, "mangle")
}

func saveTable(t *testing.T, backend string, fam Family, table string) string {
	t.Helper()
	var out []string
	for _, line := range strings.Split(cmd(t, tool(backend, fam, "-save"), "-t", table), "\n") {
		if !strings.HasPrefix(line, "#") {
			out = append(out, line)
		}
	}
	return strings.Join(out, "\n")
}

// rulesOf lists the rules of one chain in a save, without the "-A chain " prefix.
func rulesOf(dump, chain string) []string {
	var out []string
	for _, line := range strings.Split(dump, "\n") {
		if rest, ok := strings.CutPrefix(line, "-A "+chain+" "); ok {
			out = append(out, rest)
		}
	}
	return out
}

// fixture is the test's addresses in one family.
type fixture struct {
	vip, vip2, ep1, ep2, ep3, bits string
}

func fixtureFor(fam Family) fixture {
	if fam == IPv6 {
		return fixture{"2001:db8::10", "2001:db8::53", "2001:db8:1::1", "2001:db8:1::2", "2001:db8:1::3", "/128"}
	}
	return fixture{"192.0.2.10", "192.0.2.53", "198.51.100.1", "198.51.100.2", "198.51.100.3", "/32"}
}

func (f fixture) dest(ep string, port string) string {
	if strings.Contains(ep, ":") {
		return "[" + ep + "]:" + port
	}
	return ep + ":" + port
}

func (f fixture) services(webEPs ...string) []Service {
	w := Service{Namespace: "default", Name: "web", VIPs: addrs(f.vip), Ports: []Port{{Name: "http", Protocol: TCP, Port: 80}}}
	for _, a := range webEPs {
		w.Endpoints = append(w.Endpoints, ep(a, false, "http/8080"))
	}
	d := Service{Namespace: "kube-system", Name: "dns", VIPs: addrs(f.vip2), Ports: []Port{{Name: "dns", Protocol: UDP, Port: 53}},
		Endpoints: []Endpoint{ep(f.ep3, false, "dns/UDP/5353")}}
	return []Service{w, d}
}

func TestDataplane(t *testing.T) {
	for _, backend := range []string{"nft", "legacy"} {
		for _, fam := range []Family{IPv4, IPv6} {
			t.Run(backend+"/"+string(fam), func(t *testing.T) {
				enterNetns(t)
				testDataplane(t, backend, fam)
			})
		}
	}
}

func testDataplane(t *testing.T, backend string, fam Family) {
	f := fixtureFor(fam)
	ipt := func(args ...string) string { return cmd(t, tool(backend, fam, ""), args...) }
	cfg := Config{Family: fam, Backend: backend}
	webChain := svcChainName("default", "web", Port{Name: "http", Protocol: TCP}, fam)
	dnsChain := svcChainName("kube-system", "dns", Port{Name: "dns", Protocol: UDP}, fam)

	// Someone else's rules, in every built-in chain we jump from: ours go first, theirs stay.
	for _, r := range [][]string{
		{"-t", "filter", "-N", "KUBE-FOO"},
		{"-t", "filter", "-A", "KUBE-FOO", "-j", "RETURN"},
		{"-t", "filter", "-A", "INPUT", "-s", f.ep3 + f.bits, "-j", "KUBE-FOO"},
		{"-t", "filter", "-A", "FORWARD", "-j", "KUBE-FOO"},
		{"-t", "filter", "-A", "OUTPUT", "-j", "KUBE-FOO"},
		{"-t", "nat", "-A", "PREROUTING", "-d", f.vip + f.bits, "-j", "RETURN"},
		{"-t", "nat", "-A", "OUTPUT", "-j", "RETURN"},
		{"-t", "nat", "-A", "POSTROUTING", "-j", "RETURN"},
		{"-t", "mangle", "-A", "PREROUTING", "-j", "RETURN"},
	} {
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

// TestTraffic checks the rules do what they are for: a connection to VIP:port reaches an
// endpoint, and one to a port the Service does not expose is refused at once.
// TestTraffic sends real connections through each plane: the iptables plane on both backends
// and the nftables plane.
func TestTraffic(t *testing.T) {
	for _, plane := range []string{"nft", "legacy", PlaneNFTables} {
		for _, local := range []bool{false, true} {
			name := plane + "/cluster"
			if local {
				name = plane + "/local"
			}
			t.Run(name, func(t *testing.T) {
				enterNetns(t)
				testTraffic(t, plane, local)
			})
		}
	}
}

// testTraffic: plane is an iptables backend ("nft", "legacy") or PlaneNFTables.
func testTraffic(t *testing.T, plane string, local bool) {
	// The client is 198.51.100.1, the endpoint 198.51.100.2; the VIP 192.0.2.10 is routed
	// out of an interface, as if it lived elsewhere on the network. (A veth pair: this kernel
	// may lack the dummy driver.)
	cmd(t, "ip", "link", "add", "vipa0", "type", "veth", "peer", "name", "vipa1")
	cmd(t, "ip", "link", "set", "vipa1", "up")
	cmd(t, "ip", "link", "set", "vipa0", "up")
	cmd(t, "ip", "addr", "add", "198.51.100.1/32", "dev", "vipa0")
	cmd(t, "ip", "addr", "add", "198.51.100.2/32", "dev", "vipa0")
	cmd(t, "ip", "route", "add", "192.0.2.0/24", "dev", "vipa0", "src", "198.51.100.1")

	ln, err := net.Listen("tcp", "198.51.100.2:8080")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			c.Write([]byte(c.RemoteAddr().String()))
			c.Close()
		}
	}()

	// kube-proxy stand-ins: an iptables nat rule that would send the VIP's port elsewhere (a
	// closed port), appended after our jump, in every iptables backend the plane may meet.
	// Our DNAT must bind the connection first.
	backends := []string{plane}
	var d Plane
	if plane == PlaneNFTables {
		backends = []string{"nft", "legacy"}
		d, err = NewNFTables(Config{Family: IPv4})
	} else {
		d, err = NewIPTables(Config{Family: IPv4, Backend: plane})
	}
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range backends {
		cmd(t, "iptables-"+b, "-t", "nat", "-A", "OUTPUT", "-d", "192.0.2.10", "-p", "tcp", "--dport", "80", "-j", "DNAT", "--to-destination", "198.51.100.2:9")
	}
	svc := Service{Namespace: "default", Name: "web", VIPs: addrs("192.0.2.10"), Local: local,
		Ports: []Port{{Name: "http", Protocol: TCP, Port: 80}}, Endpoints: []Endpoint{ep("198.51.100.2", true, "http/8080")}}
	if _, err := d.Sync([]Service{svc}, true); err != nil {
		t.Fatal(err)
	}

	c, err := net.DialTimeout("tcp", "192.0.2.10:80", 2*time.Second)
	if err != nil {
		t.Fatalf("connect to the VIP: %v", err)
	}
	buf := make([]byte, 64)
	n, _ := c.Read(buf)
	c.Close()
	if peer, err := netip.ParseAddrPort(string(buf[:n])); err != nil || peer.Addr() != netip.MustParseAddr("198.51.100.1") {
		t.Fatalf("endpoint answered %q, want the client's address", buf[:n])
	}
	// Cluster masquerades, Local does not. (For a client on the node itself masquerade picks
	// the same address again, so count packets instead of looking at the source.)
	if masq := masqueraded(t, plane); (masq > 0) == local {
		t.Errorf("local=%v: %d packets masqueraded", local, masq)
	}

	start := time.Now()
	_, err = net.DialTimeout("tcp", "192.0.2.10:81", 2*time.Second)
	if !errors.Is(err, syscall.ECONNREFUSED) || time.Since(start) > time.Second {
		t.Errorf("connect to a port the VIP does not expose: %v after %v, want refused at once", err, time.Since(start))
	}
	if err := CleanupAll(Config{Family: IPv4, Backend: backends[0]}); err != nil {
		t.Fatal(err)
	}
}

// masqueraded counts the packets our masquerade rule has seen.
func masqueraded(t *testing.T, plane string) int {
	masq := 0
	if plane == PlaneNFTables {
		out := cmd(t, "nft", "list", "chain", "ip", nftTableName, nftNATPostrouting)
		if _, after, ok := strings.Cut(out, "counter packets "); ok {
			fmt.Sscanf(after, "%d", &masq)
		}
		return masq
	}
	for _, line := range strings.Split(cmd(t, "iptables-"+plane+"-save", "-c", "-t", "nat"), "\n") {
		if strings.Contains(line, "-A VIPA-POSTROUTING -j MASQUERADE") {
			fmt.Sscanf(line, "[%d:", &masq)
		}
	}
	return masq
}

// testHandoffs: VIPA-HANDOFF holds two rules per VIP handed over (copy to the previous owner,
// drop ours), is jumped to first from mangle PREROUTING, is emptied when the handoffs end, and
// comes back after a flush once a full Sync has run.
func testHandoffs(t *testing.T, d Plane, backend string, fam Family) {
	f := fixtureFor(fam)
	prev := f.ep3 // any address of the family stands for the previous owner's
	other := "198.51.100.7"
	if fam == IPv4 {
		other = "2001:db8::7"
	}
	h := Handoffs{netip.MustParseAddr(f.vip): netip.MustParseAddr(prev), netip.MustParseAddr(other): netip.MustParseAddr(other)}
	if err := d.SetHandoffs(h); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"-d " + f.vip + f.bits + " -p tcp -m tcp ! --tcp-flags FIN,SYN,RST,ACK SYN -m conntrack --ctstate INVALID,NEW -j TEE --gateway " + prev,
		"-d " + f.vip + f.bits + " -p tcp -m tcp ! --tcp-flags FIN,SYN,RST,ACK SYN -m conntrack --ctstate INVALID,NEW -j DROP",
	}
	mangle := saveTable(t, backend, fam, "mangle")
	if got := rulesOf(mangle, chainHandoff); !slices.Equal(got, want) {
		t.Fatalf("VIPA-HANDOFF (the other family's VIP left out):\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if pre := rulesOf(mangle, "PREROUTING"); len(pre) != 2 || !strings.HasSuffix(pre[0], "-j "+chainHandoff) {
		t.Fatalf("mangle PREROUTING, want our jump first and the other rule kept:\n%s", strings.Join(pre, "\n"))
	}
	if err := d.SetHandoffs(Handoffs{}); err != nil {
		t.Fatal(err)
	}
	if got := rulesOf(saveTable(t, backend, fam, "mangle"), chainHandoff); len(got) != 0 {
		t.Fatalf("VIPA-HANDOFF after the handoffs ended: %v", got)
	}
	if err := d.SetHandoffs(h); err != nil {
		t.Fatal(err)
	}
	cmd(t, tool(backend, fam, ""), "-t", "mangle", "-F", chainHandoff) // drift
	if _, err := d.Sync(f.services(f.ep1, f.ep2), true); err != nil {
		t.Fatal(err)
	}
	if err := d.SetHandoffs(h); err != nil {
		t.Fatal(err)
	}
	if got := rulesOf(saveTable(t, backend, fam, "mangle"), chainHandoff); !slices.Equal(got, want) {
		t.Fatalf("VIPA-HANDOFF after a flush and a full Sync: %v", got)
	}
}
