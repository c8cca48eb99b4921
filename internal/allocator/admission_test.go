package allocator

import (
	"net/netip"
	"strings"
	"testing"
)

// TestNotAdmitted: each reason a group turns a Service away, and that
// Allocate agrees: a group NotAdmitted admits gives the Service an address.
func TestNotAdmitted(t *testing.T) {
	teamA := func(_, svc map[string]string) bool { return svc["team"] == "a" }
	mk := func(name string, auto bool, admits func(_, _ map[string]string) bool, segment string) *Group {
		g, err := NewGroup(Group{Name: name, Segment: netip.MustParsePrefix(segment), AutoAssign: auto, Admits: admits})
		if err != nil {
			t.Fatal(err)
		}
		return g
	}
	lan, manual, tenant, v6 := mk("lan", true, nil, "192.0.2.0/30"), mk("manual", false, nil, "198.51.100.0/30"),
		mk("tenant", true, teamA, "203.0.113.0/30"), mk("v6", true, nil, "2001:db8::/126")
	steps := []struct {
		desc  string
		g     *Group
		req   Request
		want  string // a part of the reason; "" admits
		alloc bool   // the Service gets an address from g alone
	}{
		{"an auto-assign group admits a Service naming none", lan, Request{Families: []Family{IPv4}}, "", true},
		{"autoAssign false needs naming", manual, Request{Families: []Family{IPv4}}, "autoAssign is false", false},
		{"named, it admits", manual, Request{Families: []Family{IPv4}, Groups: []string{"manual"}}, "", true},
		{"another group named", lan, Request{Families: []Family{IPv4}, Groups: []string{"manual"}}, "names IPGroup manual", false},
		{"no address of the family", v6, Request{Families: []Family{IPv4}}, "no IPv4 addresses", false},
		{"selectors do not match", tenant, Request{Families: []Family{IPv4}, ServiceLabels: map[string]string{"team": "b"}}, "serviceSelector does not match", false},
		{"selectors match", tenant, Request{Families: []Family{IPv4}, ServiceLabels: map[string]string{"team": "a"}}, "", true},
	}
	for _, s := range steps {
		got := NotAdmitted(s.g, IPv4, s.req)
		if (s.want == "") != (got == "") || !strings.Contains(got, s.want) {
			t.Errorf("%s: %q, want %q", s.desc, got, s.want)
		}
		a := New()
		a.SetGroups([]*Group{s.g})
		_, err := a.Allocate("default/svc", s.req)
		if (err == nil) != s.alloc {
			t.Errorf("%s: Allocate: %v, want an address: %v", s.desc, err, s.alloc)
		}
	}
}
