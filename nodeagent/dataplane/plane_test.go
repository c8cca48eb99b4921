//go:build root

package dataplane

import (
	"errors"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
)

// What both planes are tested with against the kernel, and the tests that concern both: real
// traffic through each plane, the connection handoff, and one plane taking over from the
// other. Every kernel test runs inside its own fresh network namespace (its goroutine's
// thread is moved there), so the host's rules are never touched.

// enterNetns moves the calling test goroutine into a new network namespace, deleted when the
// test ends, failed or not.
func enterNetns(t *testing.T) {
	t.Helper()
	netnstest.EnterTest(t, "vipa-dp-test")
}

// cmd runs a command in the test's namespace and fails the test if it fails.
func cmd(t *testing.T, name string, args ...string) string {
	t.Helper()
	return netnstest.Run(t, append([]string{name}, args...)...)
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
// openPlane opens the plane a test names: PlaneNFTables, or an iptables
// backend ("nft", "legacy").
func openPlane(t *testing.T, plane string, fam Family) Plane {
	t.Helper()
	var p Plane
	var err error
	if plane == PlaneNFTables {
		p, err = NewNFTables(Config{Family: fam})
	} else {
		p, err = NewIPTables(Config{Family: fam, Backend: plane})
	}
	if err != nil {
		t.Fatal(err)
	}
	return p
}

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
	// out of an interface, as if it lived elsewhere on the network.
	netnstest.Veth(t, "vipa0", "", "vipa1")
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

// TestPlaneTakeover: a plane's first full Sync removes what the other plane left on the node
// (the agent was switched, or upgraded to another default), except the handoff chain, which
// the nftables plane uses too.
func TestPlaneTakeover(t *testing.T) {
	enterNetns(t)
	f := fixtureFor(IPv4)
	ipt, err := NewIPTables(Config{Family: IPv4, Backend: "nft"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ipt.Sync(f.services(f.ep1), true); err != nil {
		t.Fatal(err)
	}
	if err := ipt.SetHandoffs(Handoffs{netip.MustParseAddr(f.vip): netip.MustParseAddr(f.ep3)}); err != nil {
		t.Fatal(err)
	}
	n, err := NewNFTables(Config{Family: IPv4})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := n.Sync(f.services(f.ep1), false); err != nil {
		t.Fatal(err)
	}
	dump := save(t, "nft", IPv4)
	if strings.Contains(dump, chainServices) || strings.Contains(dump, chainFilter) || !strings.Contains(dump, "-j "+chainHandoff) {
		t.Fatalf("after the nftables plane took over, want only the handoff left in iptables:\n%s", dump)
	}
	if nftList(t, IPv4) == "" {
		t.Fatal("no nftables table")
	}
	ipt2, err := NewIPTables(Config{Family: IPv4, Backend: "nft"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := ipt2.Sync(f.services(f.ep1), false); err != nil {
		t.Fatal(err)
	}
	if table := nftList(t, IPv4); table != "" {
		t.Fatalf("after the iptables plane took over, our nftables table is still there:\n%s", table)
	}
}
