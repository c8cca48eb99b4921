//go:build root

package dataplane

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// testReturnMarks checks what a plane writes of the return marks, in the kernel: the
// chain as iptables-save spells it, its jumps, drift repair, and that nothing is written on a
// node that never needed marks.
func testReturnMarks(t *testing.T, d Plane, backend string, fam Family) {
	if err := d.SetReturnMarks(nil); err != nil {
		t.Fatal(err)
	}
	if dump := saveTable(t, backend, fam, "mangle"); strings.Contains(dump, chainReturn) {
		t.Fatalf("no marks ever: want no VIPA-RETURN, got:\n%s", dump)
	}
	dst := map[Family]string{IPv4: "192.0.2.0/24", IPv6: "2001:db8:b::/64"}[fam]
	marks := []ReturnMark{{Interface: "eth1", Mark: 0x1000000, Mask: 0xf000000, Destinations: []netip.Prefix{netip.MustParsePrefix(dst)}}}
	if err := d.SetReturnMarks(marks); err != nil {
		t.Fatal(err)
	}
	want := []string{
		"-d " + dst + " -i eth1 -m addrtype ! --dst-type LOCAL -m conntrack --ctstate NEW -j CONNMARK --set-xmark 0x1000000/0xf000000",
		"-m connmark --mark 0x0/0xf000000 -j RETURN",
		"-m connmark --mark 0x1000000/0xf000000 -j MARK --set-xmark 0x1000000/0xf000000",
	}
	mangle := saveTable(t, backend, fam, "mangle")
	if got := rulesOf(mangle, chainReturn); !slices.Equal(got, want) {
		t.Fatalf("VIPA-RETURN:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	for _, from := range []string{"PREROUTING", "OUTPUT"} {
		if !slices.ContainsFunc(rulesOf(mangle, from), func(r string) bool { return strings.HasSuffix(r, "-j "+chainReturn) }) {
			t.Fatalf("mangle %s has no jump to %s:\n%s", from, chainReturn, mangle)
		}
	}
	if !d.Healthy() {
		t.Fatal("unhealthy with the marks in place")
	}
	// Drift: the jump from PREROUTING goes; the plane notices, and a full Sync plus the
	// next SetReturnMarks put it back.
	cmd(t, tool(backend, fam, ""), "-t", "mangle", "-D", "PREROUTING", "-m", "comment", "--comment", "vip-allocator service VIPs", "-j", chainReturn)
	if d.Healthy() {
		t.Fatal("healthy with the jump to VIPA-RETURN gone")
	}
	if _, err := d.Sync(fixtureFor(fam).services(fixtureFor(fam).ep1), true); err != nil {
		t.Fatal(err)
	}
	if err := d.SetReturnMarks(marks); err != nil {
		t.Fatal(err)
	}
	if !d.Healthy() {
		t.Fatalf("unhealthy after the repair:\n%s", saveTable(t, backend, fam, "mangle"))
	}
}
