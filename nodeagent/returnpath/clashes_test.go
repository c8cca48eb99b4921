package returnpath

import (
	"net"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
)

// At start the agent refuses marks and tables another system uses on the
// node; its own rules and routes from an earlier run are no clash.
func TestClashes(t *testing.T) {
	l := returnplan.DefaultLayout
	mask := func(m uint32) *uint32 { return &m }
	rule := func(prio int, mark uint32, m *uint32, table int) netlink.Rule {
		r := netlink.NewRule()
		r.Priority, r.Mark, r.Mask, r.Table = prio, mark, m, table
		return *r
	}
	def := &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	for _, tc := range []struct {
		name   string
		rules  []netlink.Rule
		routes []netlink.Route
		want   string // in the one clash; "" for none
	}{
		{"the agent's own rules and routes", rulesOf(l, returnplan.Path{Mark: 1 << 24, Table: 5301}, netlink.FAMILY_V4),
			[]netlink.Route{{Table: 5301, Dst: def, Protocol: unix.RTPROT_STATIC}}, ""},
		{"kube-proxy's and the main table's", []netlink.Rule{rule(0, 0, nil, unix.RT_TABLE_LOCAL), rule(32766, 0, nil, unix.RT_TABLE_MAIN), rule(100, 0x4000, mask(0x4000), 100)}, nil, ""},
		{"Cilium's identity marks (0x0f00) elsewhere", []netlink.Rule{rule(9, 0x200, mask(0xf00), 2004)}, nil, ""},
		{"Calico's default mark mask 0xffff0000", []netlink.Rule{rule(100, 0x10000000, mask(0xffff0000), 200)}, nil, "overlaps the return path marks"},
		{"a mark with no mask", []netlink.Rule{rule(100, 0x1000000, nil, 200)}, nil, "overlaps the return path marks"},
		{"a rule into one of the tables", []netlink.Rule{rule(100, 0, nil, 5305)}, nil, "looks up table 5305"},
		{"a foreign route in one of the tables", nil, []netlink.Route{{Table: 5303, Dst: &net.IPNet{IP: net.ParseIP("198.51.100.0").To4(), Mask: net.CIDRMask(24, 32)}}}, "holds a route the agent does not write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := Clashes(l, tc.rules, tc.routes)
			if tc.want == "" {
				if len(got) != 0 {
					t.Fatalf("clashes %q, want none", got)
				}
				return
			}
			if len(got) != 1 || !strings.Contains(got[0], tc.want) {
				t.Fatalf("clashes %q, want one saying %q", got, tc.want)
			}
		})
	}
	moved := returnplan.Layout{MarkShift: 4, TableBase: 1000}
	if got := Clashes(moved, []netlink.Rule{rule(100, 0x10000000, mask(0xffff0000), 200)}, nil); len(got) != 0 {
		t.Errorf("moved off Calico's bits: clashes %q", got)
	}
}
