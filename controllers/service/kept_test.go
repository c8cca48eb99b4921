package service

import (
	"fmt"
	"net/netip"
	"testing"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

func TestKeptAddresses(t *testing.T) {
	mustGroup := func(g allocator.Group) *allocator.Group {
		p, err := allocator.NewGroup(g)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	shrunk := mustGroup(allocator.Group{Name: "g", Segment: netip.MustParsePrefix("192.0.2.0/25"), AutoAssign: true})
	other := mustGroup(allocator.Group{Name: "other", Segment: netip.MustParsePrefix("198.51.100.0/24"), AutoAssign: true})
	entry := func(addr, group string) paasv1.IP {
		ip := paasv1.IP{Spec: paasv1.IPSpec{Address: addr}}
		ip.Name = addr
		ip.Labels = map[string]string{paasv1.IPGroupLabel: group}
		return ip
	}
	any4 := allocator.Request{Families: []allocator.Family{allocator.IPv4}}
	for _, tc := range []struct {
		desc   string
		ledger []paasv1.IP
		groups map[string]groupProtection
		req    allocator.Request
		want   string
	}{
		{desc: "an address outside the shrunk group is kept",
			ledger: []paasv1.IP{entry("192.0.2.200", "g")}, groups: map[string]groupProtection{"g": {group: shrunk}}, req: any4, want: "[192.0.2.200]"},
		{desc: "one it still allows needs no keeping",
			ledger: []paasv1.IP{entry("192.0.2.10", "g")}, groups: map[string]groupProtection{"g": {group: shrunk}}, req: any4, want: "[]"},
		{desc: "released: not kept",
			ledger: []paasv1.IP{entry("192.0.2.200", "g")}, groups: map[string]groupProtection{"g": {group: shrunk, released: true}}, req: any4, want: "[]"},
		{desc: "a group being deleted keeps every address",
			ledger: []paasv1.IP{entry("192.0.2.10", "g")}, groups: map[string]groupProtection{"g": {group: shrunk, deleting: true}}, req: any4, want: "[192.0.2.10]"},
		{desc: "a group that is gone keeps nothing (deleted despite its finalizer)",
			ledger: []paasv1.IP{entry("192.0.2.10", "g")}, groups: map[string]groupProtection{"other": {group: other}}, req: any4, want: "[]"},
		{desc: "the Service now names another group: it asked to move",
			ledger: []paasv1.IP{entry("192.0.2.200", "g")}, groups: map[string]groupProtection{"g": {group: shrunk}},
			req: allocator.Request{Families: any4.Families, Groups: []string{"other"}}, want: "[]"},
		{desc: "a group whose spec is unusable keeps its addresses",
			ledger: []paasv1.IP{entry("192.0.2.10", "g")}, groups: map[string]groupProtection{"g": {}}, req: any4, want: "[192.0.2.10]"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := fmt.Sprint(keptAddresses(tc.ledger, tc.groups, tc.req)); got != tc.want {
				t.Errorf("kept = %s, want %s", got, tc.want)
			}
		})
	}
}
