//go:build root

package dataplane

import (
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"testing"
)

// TestHeld reads back, from the kernel of a throwaway network namespace, what
// each plane holds for a VIP, then again after an endpoint's element or rule
// was deleted by hand: Held must see the kernel, not the plane's memory.
func TestHeld(t *testing.T) {
	for _, plane := range []string{"nft", "legacy", PlaneNFTables} {
		for _, fam := range []Family{IPv4, IPv6} {
			t.Run(plane+"/"+string(fam), func(t *testing.T) {
				enterNetns(t)
				testHeld(t, plane, fam)
			})
		}
	}
}

func testHeld(t *testing.T, plane string, fam Family) {
	f := fixtureFor(fam)
	p := openPlane(t, plane, fam)
	if _, err := p.Sync(f.services(f.ep1, f.ep2), true); err != nil {
		t.Fatal(err)
	}
	vip := netip.MustParseAddr(f.vip)
	spell := func(h []Held) string {
		var out []string
		for _, x := range h {
			out = append(out, x.VIP.String()+" "+string(x.Protocol)+" "+strconv.Itoa(int(x.Port))+" -> "+joinAddrPorts(x.Endpoints))
		}
		return strings.Join(out, "\n")
	}
	r := p.(HeldReader)
	got, err := r.Held([]netip.Addr{vip})
	if err != nil {
		t.Fatal(err)
	}
	want := f.vip + " TCP 80 -> " + f.dest(f.ep1, "8080") + "," + f.dest(f.ep2, "8080")
	if spell(got) != want {
		t.Fatalf("held:\n%s\nwant\n%s", spell(got), want)
	}
	// The other VIP (kube-system/dns) is not asked about: not read.
	if slices.ContainsFunc(got, func(h Held) bool { return h.VIP.String() == f.vip2 }) {
		t.Fatalf("held %s, not asked about", f.vip2)
	}
	deleteOneEndpoint(t, plane, fam, f)
	if got, err = r.Held([]netip.Addr{vip}); err != nil {
		t.Fatal(err)
	}
	if s := spell(got); s == want || !strings.HasPrefix(s, f.vip+" TCP 80 -> ") || strings.Count(s, ",") != 0 {
		t.Fatalf("held after deleting one endpoint by hand:\n%s\nwant one endpoint", s)
	}
}

// deleteOneEndpoint removes the first endpoint of the web Service's port by
// hand, as a person (or a buggy tool) would.
func deleteOneEndpoint(t *testing.T, plane string, fam Family, f fixture) {
	if plane == PlaneNFTables {
		table := cmd(t, "nft", "list", "table", nftFamily(fam), nftTableName)
		i := strings.Index(table, "map endpoints_2_")
		name := strings.Fields(table[i:])[1]
		key := f.vip + " . 6 . 80 . 0"
		cmd(t, "nft", "delete", "element", nftFamily(fam), nftTableName, name, "{ "+key+" }")
		return
	}
	for _, line := range strings.Split(saveTable(t, plane, fam, "nat"), "\n") {
		if strings.HasPrefix(line, "-A "+svcChainStem) && strings.Contains(line, "--to-destination") {
			args := append([]string{"-t", "nat", "-D"}, strings.Fields(line)[1:]...)
			cmd(t, tool(plane, fam, ""), args...)
			return
		}
	}
	t.Fatal("no DNAT rule to delete")
}

func joinAddrPorts(eps []netip.AddrPort) string {
	var out []string
	for _, e := range eps {
		out = append(out, e.String())
	}
	return strings.Join(out, ",")
}
