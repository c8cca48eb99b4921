package returnplan

import (
	"net/netip"
	"strings"
	"testing"

	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

// The marks and tables of the ways back move where the admin says, and never
// onto kube-proxy's bits, the masquerade bit or the kernel's tables.
func TestLayoutValidate(t *testing.T) {
	for _, tc := range []struct {
		name string
		l    Layout
		masq int
		err  string
	}{
		{"the default", DefaultLayout, 21, ""},
		{"bits 4-7, tables 1000-1015", Layout{MarkShift: 4, TableBase: 1000}, 21, ""},
		{"past bit 31", Layout{MarkShift: 29, TableBase: 5300}, 21, "end by bit 31"},
		{"on kube-proxy's bits", Layout{MarkShift: 12, TableBase: 5300}, 21, "kube-proxy"},
		{"on the masquerade bit", Layout{MarkShift: 20, TableBase: 5300}, 21, "masquerade bit 21"},
		{"on the main table", Layout{MarkShift: 24, TableBase: 250}, 21, "253-255"},
		{"table 0", Layout{MarkShift: 24, TableBase: 0}, 21, "253-255"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := tc.l.Validate(tc.masq)
			if (err == nil) != (tc.err == "") || (err != nil && !strings.Contains(err.Error(), tc.err)) {
				t.Fatalf("Validate = %v, want %q", err, tc.err)
			}
		})
	}
}

func TestDecideInLayout(t *testing.T) {
	ifaces := []Interface{
		{Name: "eth0", Index: 2, Prefixes: []netip.Prefix{netip.MustParsePrefix("10.0.0.5/24")},
			Gateways: map[allocator.Family]netip.Addr{allocator.IPv4: netip.MustParseAddr("10.0.0.1")}, Default: map[allocator.Family]bool{allocator.IPv4: true}},
		{Name: "eth1", Index: 3, Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.11/24")},
			Gateways: map[allocator.Family]netip.Addr{allocator.IPv4: netip.MustParseAddr("192.0.2.1")}},
	}
	groups := []Group{{Name: "g", Prefixes: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}}
	got := Layout{MarkShift: 4, TableBase: 1000}.Decide(ifaces, groups)
	if len(got.Paths) != 1 || got.Paths[0].Mark != 0x10 || got.Paths[0].Table != 1001 {
		t.Fatalf("paths %+v: want mark 0x10 and table 1001", got.Paths)
	}
}
