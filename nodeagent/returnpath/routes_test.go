//go:build root

package returnpath

import (
	"net/netip"
	"reflect"
	"strings"
	"testing"

	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
)

// TestApplyInTheKernel observes a node with two networks, applies what Decide makes of it,
// repairs drift and cleans up, inside a throwaway network namespace; the main tables never
// change.
func TestApplyInTheKernel(t *testing.T) {
	netnstest.EnterTest(t, "vipa-rp-test")
	for _, l := range [][]string{{"a", "203.0.113.11/24", "2001:db8:a::11/64"}, {"b", "192.0.2.11/24", "2001:db8:b::11/64"}} {
		netnstest.Veth(t, "net"+l[0], "", "peer"+l[0])
		netnstest.Run(t, "ip", "addr", "add", l[1], "dev", "net"+l[0])
		netnstest.Run(t, "ip", "addr", "add", l[2], "dev", "net"+l[0], "nodad")
	}
	netnstest.Run(t, "ip", "route", "add", "default", "via", "203.0.113.1")
	netnstest.Run(t, "ip", "-6", "route", "add", "default", "via", "2001:db8:a::1")
	// A route of the main table by netb names its router: learned, as no group names one.
	netnstest.Run(t, "ip", "-6", "route", "add", "2001:db8:c::/64", "via", "2001:db8:b::1")
	// The kernel adds the links' fe80::/64 routes when it gets to it: left out.
	mainTables := func() string {
		var keep []string
		for _, l := range strings.Split(netnstest.Run(t, "ip", "-4", "route", "show", "table", "main")+netnstest.Run(t, "ip", "-6", "route", "show", "table", "main"), "\n") {
			if !strings.HasPrefix(l, "fe80::") {
				keep = append(keep, l)
			}
		}
		return strings.Join(keep, "\n")
	}
	before := mainTables()

	ifaces, err := Interfaces()
	if err != nil {
		t.Fatal(err)
	}
	groups := []returnplan.Group{
		{Name: "b", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, Gateways: map[allocator.Family]netip.Addr{allocator.IPv4: netip.MustParseAddr("192.0.2.1")}},
		{Name: "b6", Prefixes: []netip.Prefix{netip.MustParsePrefix("2001:db8:b::/64")}},
	}
	plan := returnplan.Decide(ifaces, groups)
	if len(plan.Paths) != 1 || plan.Paths[0].Interface != "netb" || !reflect.DeepEqual(plan.Paths[0].Gateways, map[allocator.Family]netip.Addr{allocator.IPv4: netip.MustParseAddr("192.0.2.1"), allocator.IPv6: netip.MustParseAddr("2001:db8:b::1")}) || len(plan.Missing) != 0 {
		t.Fatalf("plan of the namespace's interfaces %+v:\n%+v", ifaces, plan)
	}
	wantRules := map[string]string{
		"-4": "31000:\tfrom all fwmark 0x1000000/0xf000000 lookup main suppress_prefixlength 0 \n31001:\tfrom all fwmark 0x1000000/0xf000000 lookup 5301 \n",
		"-6": "31000:\tfrom all fwmark 0x1000000/0xf000000 lookup main suppress_prefixlength 0 \n31001:\tfrom all fwmark 0x1000000/0xf000000 lookup 5301 \n",
	}
	wantRoutes := map[string]string{"-4": "default via 192.0.2.1 dev netb proto static", "-6": "default via 2001:db8:b::1 dev netb proto static"}
	check := func(when string) {
		t.Helper()
		for fam, want := range wantRules {
			var ours strings.Builder
			for _, line := range strings.SplitAfter(netnstest.Run(t, "ip", fam, "rule"), "\n") {
				if strings.HasPrefix(line, "3100") {
					ours.WriteString(line)
				}
			}
			if got := strings.ReplaceAll(ours.String(), " \n", "\n"); got != strings.ReplaceAll(want, " \n", "\n") {
				t.Errorf("%s: ip %s rule, ours:\n%q\nwant:\n%q", when, fam, got, want)
			}
			if got := netnstest.Run(t, "ip", fam, "route", "show", "table", "5301"); !strings.HasPrefix(strings.TrimSpace(got), wantRoutes[fam]) {
				t.Errorf("%s: ip %s route show table 5301:\n%s\nwant %s", when, fam, got, wantRoutes[fam])
			}
		}
		if after := mainTables(); after != before {
			t.Fatalf("%s: the main tables changed:\n%s\nbefore:\n%s", when, after, before)
		}
	}
	if err := Apply(plan); err != nil {
		t.Fatal(err)
	}
	check("applied")
	if err := Apply(plan); err != nil {
		t.Fatal(err)
	}
	check("applied twice")
	if got := strings.TrimSpace(netnstest.Run(t, "cat", "/proc/sys/net/ipv4/conf/netb/src_valid_mark")); got != "1" {
		t.Errorf("src_valid_mark of netb is %s, want 1", got)
	}
	// Drift: our route and one rule go, a stale route of ours appears in another table.
	netnstest.Run(t, "ip", "route", "del", "default", "table", "5301")
	netnstest.Run(t, "ip", "-6", "rule", "del", "pref", "31001")
	netnstest.Run(t, "ip", "route", "add", "default", "via", "192.0.2.1", "table", "5302")
	if err := Apply(plan); err != nil {
		t.Fatal(err)
	}
	check("repaired")
	if got := netnstest.Run(t, "ip", "route", "show", "table", "5302"); strings.TrimSpace(got) != "" {
		t.Errorf("a stale table of ours is left: %s", got)
	}
	if err := Cleanup(returnplan.DefaultLayout); err != nil {
		t.Fatal(err)
	}
	for _, fam := range []string{"-4", "-6"} {
		if rules := netnstest.Run(t, "ip", fam, "rule"); strings.Contains(rules, "3100") {
			t.Errorf("ip %s rule after Cleanup:\n%s", fam, rules)
		}
		if routes := netnstest.Run(t, "ip", fam, "route", "show", "table", "all"); strings.Contains(routes, "table 530") {
			t.Errorf("ip %s routes of our tables after Cleanup:\n%s", fam, routes)
		}
	}
	if after := mainTables(); after != before {
		t.Fatalf("after Cleanup the main tables changed:\n%s\nbefore:\n%s", after, before)
	}
}
