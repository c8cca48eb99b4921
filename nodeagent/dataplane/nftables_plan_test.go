package dataplane

import (
	"maps"
	"slices"
	"strings"
	"testing"
)

// changes spells a plan as sorted "+element" and "-element" lines, plus "map K" for each
// endpoint map a partial Sync creates.
func changes(p *nftPlan) []string {
	var out []string
	add := func(e nftElem) { out = append(out, "+"+e.String()) }
	if p.full {
		p.state.each(add)
	}
	for _, e := range p.add {
		add(e)
	}
	for _, e := range p.del {
		out = append(out, "-"+e.String())
	}
	slices.Sort(out)
	for _, k := range p.newMaps {
		out = append(out, "map "+endpointsSet(k).String())
	}
	return out
}

// nftPlanStep is one Sync of TestNFTPlanSteps: its Services and the changes
// its plan makes.
type nftPlanStep struct {
	desc     string
	full     bool
	fam      Family
	services []Service
	want     []string
}

// nftPlanSteps are TestNFTPlanSteps' Syncs, in order.
func nftPlanSteps() []nftPlanStep {
	web2 := web(ep("198.51.100.1", true, "http/8080"), ep("198.51.100.2", false, "http/8080"))
	shared := Service{Namespace: "default", Name: "shared", VIPs: addrs("192.0.2.10"), // web's VIP, another port
		Ports: []Port{{Name: "ssh", Protocol: TCP, Port: 22}}, Endpoints: []Endpoint{ep("198.51.100.3", false, "ssh/22")}}
	thief := Service{Namespace: "default", Name: "a-thief", VIPs: addrs("192.0.2.10"), // web's VIP and port: sorts first
		Ports: []Port{{Name: "http", Protocol: TCP, Port: 80}}, Endpoints: []Endpoint{ep("198.51.100.9", false, "http/80")}}
	return []nftPlanStep{
		{desc: "full: every element, one map per endpoint count", full: true, services: []Service{web2, dns(ep("198.51.100.3", false, "dns/UDP/5353"))},
			want: []string{
				"+endpoints_1 192.0.2.53 . 17 . 53 . 0 : 198.51.100.3 . 5353", // dns-tcp has no endpoint port: not DNATed
				"+endpoints_2 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"+endpoints_2 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
				"+masquerade 192.0.2.10 . 6 . 80",
				"+masquerade 192.0.2.53 . 17 . 53",
				"+vips 192.0.2.10",
				"+vips 192.0.2.53",
			}},
		{desc: "partial, nothing changed: nothing to write", services: []Service{web2, dns(ep("198.51.100.3", false, "dns/UDP/5353"))}},
		{desc: "an endpoint gone: its Service port moves to the 1-endpoint map, which exists", services: []Service{web(ep("198.51.100.2", false, "http/8080")), dns(ep("198.51.100.3", false, "dns/UDP/5353"))},
			want: []string{
				"+endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.2 . 8080",
				"-endpoints_2 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"-endpoints_2 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
			}},
		{desc: "three endpoints, one a duplicate: a new map and its rule", services: []Service{
			web(ep("198.51.100.5", false, "http/8080"), ep("198.51.100.2", false, "http/8080"), ep("198.51.100.4", false, "http/8080"), ep("198.51.100.4", false, "http/8080")),
			dns(ep("198.51.100.3", false, "dns/UDP/5353"))},
			want: []string{
				"+endpoints_3 192.0.2.10 . 6 . 80 . 0 : 198.51.100.2 . 8080",
				"+endpoints_3 192.0.2.10 . 6 . 80 . 1 : 198.51.100.4 . 8080",
				"+endpoints_3 192.0.2.10 . 6 . 80 . 2 : 198.51.100.5 . 8080",
				"-endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.2 . 8080",
				"map endpoints_3",
			}},
		{desc: "policy Local: only local endpoints, masquerade for hairpin only", services: []Service{
			func() Service { s := web2; s.Local = true; return s }(), dns(ep("198.51.100.3", false, "dns/UDP/5353"))},
			want: []string{
				"+endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"+hairpin 192.0.2.10 . 6 . 80 . 198.51.100.1",
				"-endpoints_3 192.0.2.10 . 6 . 80 . 0 : 198.51.100.2 . 8080",
				"-endpoints_3 192.0.2.10 . 6 . 80 . 1 : 198.51.100.4 . 8080",
				"-endpoints_3 192.0.2.10 . 6 . 80 . 2 : 198.51.100.5 . 8080",
				"-masquerade 192.0.2.10 . 6 . 80",
			}},
		{desc: "Services gone: all their elements, VIPs included", services: []Service{fw("203.0.113.0/24", "203.0.113.128/25", "198.51.100.7/32", "2001:db8::/32")},
			want: []string{
				"+allowed 192.0.2.30 . 6 . 80 . 198.51.100.7-192.0.2.30 . 6 . 80 . 198.51.100.7",
				"+allowed 192.0.2.30 . 6 . 80 . 203.0.113.0-192.0.2.30 . 6 . 80 . 203.0.113.255", // the /25 inside it is left out
				"+endpoints_1 192.0.2.30 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"+masquerade 192.0.2.30 . 6 . 80",
				"+restricted 192.0.2.30 . 6 . 80",
				"+vips 192.0.2.30",
				"-endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"-endpoints_1 192.0.2.53 . 17 . 53 . 0 : 198.51.100.3 . 5353",
				"-hairpin 192.0.2.10 . 6 . 80 . 198.51.100.1",
				"-masquerade 192.0.2.53 . 17 . 53",
				"-vips 192.0.2.10",
				"-vips 192.0.2.53",
			}},
		{desc: "source ranges all of the other family: nobody of this family may come, so only the VIP stays, rejected (as iptables does)", services: []Service{fw("2001:db8::/32")},
			want: []string{
				"-allowed 192.0.2.30 . 6 . 80 . 198.51.100.7-192.0.2.30 . 6 . 80 . 198.51.100.7",
				"-allowed 192.0.2.30 . 6 . 80 . 203.0.113.0-192.0.2.30 . 6 . 80 . 203.0.113.255",
				"-endpoints_1 192.0.2.30 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"-masquerade 192.0.2.30 . 6 . 80",
				"-restricted 192.0.2.30 . 6 . 80",
			}},
		{desc: "source ranges that do not parse close the Service: no DNAT, the VIP rejected", services: []Service{closed(fw("203.0.113.0/24"))},
			want: []string{}},
		{desc: "fixed ranges open it again", services: []Service{fw("203.0.113.0/24")},
			want: []string{
				"+allowed 192.0.2.30 . 6 . 80 . 203.0.113.0-192.0.2.30 . 6 . 80 . 203.0.113.255",
				"+endpoints_1 192.0.2.30 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"+masquerade 192.0.2.30 . 6 . 80",
				"+restricted 192.0.2.30 . 6 . 80",
			}},
		{desc: "closed once more", services: []Service{closed(fw("203.0.113.0/24"))},
			want: []string{
				"-allowed 192.0.2.30 . 6 . 80 . 203.0.113.0-192.0.2.30 . 6 . 80 . 203.0.113.255",
				"-endpoints_1 192.0.2.30 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"-masquerade 192.0.2.30 . 6 . 80",
				"-restricted 192.0.2.30 . 6 . 80",
			}},
		{desc: "full again: TCP, UDP, SCTP, named ports resolved per endpoint, a port without endpoints only rejected", full: true, services: []Service{multi()},
			want: []string{
				"+endpoints_1 192.0.2.20 . 132 . 9000 . 0 : 198.51.100.1 . 9001",
				"+endpoints_1 192.0.2.20 . 17 . 53 . 0 : 198.51.100.1 . 5353",
				"+endpoints_2 192.0.2.20 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"+endpoints_2 192.0.2.20 . 6 . 80 . 1 : 198.51.100.2 . 8081",
				"+masquerade 192.0.2.20 . 132 . 9000",
				"+masquerade 192.0.2.20 . 17 . 53",
				"+masquerade 192.0.2.20 . 6 . 80",
				"+vips 192.0.2.20",
			}},
		{desc: "a VIP two Services share (distinct ports) stays while one of them does", full: true, services: []Service{web2, shared},
			want: []string{
				"+endpoints_1 192.0.2.10 . 6 . 22 . 0 : 198.51.100.3 . 22",
				"+endpoints_2 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"+endpoints_2 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
				"+masquerade 192.0.2.10 . 6 . 22",
				"+masquerade 192.0.2.10 . 6 . 80",
				"+vips 192.0.2.10",
			}},
		{desc: "web goes, shared keeps the VIP", services: []Service{shared},
			want: []string{
				"-endpoints_2 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"-endpoints_2 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
				"-masquerade 192.0.2.10 . 6 . 80",
			}},
		{desc: "two Services claiming one VIP:port: the first by name serves it, the other writes nothing for it", full: true, services: []Service{web2, thief},
			want: []string{
				"+endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.9 . 80",
				"+masquerade 192.0.2.10 . 6 . 80",
				"+vips 192.0.2.10",
			}},
		{desc: "IPv6: its own addresses only", full: true, fam: IPv6, services: []Service{web(ep("198.51.100.1", false, "http/8080"), ep("2001:db8:1::1", false, "http/8080")), fw("2001:db8:2::/48")},
			want: []string{
				"+allowed 2001:db8::30 . 6 . 80 . 2001:db8:2::-2001:db8::30 . 6 . 80 . 2001:db8:2:ffff:ffff:ffff:ffff:ffff",
				"+endpoints_1 2001:db8::10 . 6 . 80 . 0 : 2001:db8:1::1 . 8080",
				"+endpoints_1 2001:db8::30 . 6 . 80 . 0 : 2001:db8:1::1 . 8080",
				"+masquerade 2001:db8::10 . 6 . 80",
				"+masquerade 2001:db8::30 . 6 . 80",
				"+restricted 2001:db8::30 . 6 . 80",
				"+vips 2001:db8::10",
				"+vips 2001:db8::30",
			}},
	}
}

// TestNFTPlanSteps follows one nftables plane's state through full and partial Syncs: each
// step builds on the last, as the agent's Syncs do.
func TestNFTPlanSteps(t *testing.T) {
	var last *nftState
	for _, s := range nftPlanSteps() {
		fam := s.fam
		if fam == "" {
			fam = IPv4
		}
		if s.full {
			last = nil
		}
		p := planNFTables(fam, s.services, last)
		if p.full != s.full {
			t.Fatalf("%s: full = %v", s.desc, p.full)
		}
		if got := changes(p); !slices.Equal(got, s.want) {
			t.Fatalf("%s:\ngot:\n%s\nwant:\n%s", s.desc, strings.Join(got, "\n"), strings.Join(s.want, "\n"))
		}
		last = p.state
	}
}

// TestNFTPlanIgnoresOrder: informer order must not cause writes.
func TestNFTPlanIgnoresOrder(t *testing.T) {
	a := []Service{web(ep("198.51.100.1", false, "http/8080"), ep("198.51.100.2", false, "http/8080")), multi(), fw("203.0.113.0/24", "198.51.100.0/24")}
	b := []Service{a[2], a[0], a[1]}
	b[1].Endpoints = []Endpoint{a[0].Endpoints[1], a[0].Endpoints[0]}
	b[0].SourceRanges = prefixes("198.51.100.0/24", "203.0.113.0/24")
	p := planNFTables(IPv4, a, nil)
	if got := changes(planNFTables(IPv4, b, p.state)); len(got) != 0 {
		t.Fatalf("reordered input wrote:\n%s", strings.Join(got, "\n"))
	}
}

// TestNFTPlanChangedHint: a partial plan told which Services changed writes exactly what one
// comparing every Service writes, also when a released Service port goes to a Service that
// was not named (it had lost that port to the Service that released it): the plan that
// renders only the named Services (planNFTablesChanged) gives way to the ordered one then,
// and only then.
func TestNFTPlanChangedHint(t *testing.T) {
	web2 := web(ep("198.51.100.1", true, "http/8080"), ep("198.51.100.2", false, "http/8080"))
	web1 := web(ep("198.51.100.2", false, "http/8080"))
	dnsA := dns(ep("198.51.100.3", false, "dns/UDP/5353"))
	// zz-late claims web's VIP:port but sorts after web: it serves it only once web lets go.
	late := Service{Namespace: "default", Name: "zz-late", VIPs: addrs("192.0.2.10"),
		Ports: []Port{{Name: "http", Protocol: TCP, Port: 80}}, Endpoints: []Endpoint{ep("198.51.100.9", false, "http/80")}}
	noEndpoints := web()
	webMoved := web2 // to another port: port 80 is released
	webMoved.Ports = []Port{{Name: "http", Protocol: TCP, Port: 8081}}
	aaa := Service{Namespace: "default", Name: "aaa", VIPs: addrs("192.0.2.30"), // sorts first
		Ports: []Port{{Name: "http", Protocol: TCP, Port: 80}}, Endpoints: []Endpoint{ep("198.51.100.7", false, "http/80")}}
	type step struct {
		services []Service
		changed  []string
		inPlace  bool // planNFTablesChanged plans it (no port released)
	}
	for _, tc := range []struct {
		name     string
		start    []Service
		steps    []step
		wantLast []string // what the last step writes
	}{
		{name: "one endpoint of one Service, back and forth", start: []Service{web2, dnsA},
			steps: []step{{[]Service{web1, dnsA}, []string{"default/web"}, true}, {[]Service{web2, dnsA}, []string{"default/web"}, true}},
			wantLast: []string{
				"+endpoints_2 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"+endpoints_2 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
				"-endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.2 . 8080",
			}},
		{name: "named but unchanged: nothing to write", start: []Service{web2, dnsA},
			steps: []step{{[]Service{dnsA, web2}, []string{"default/web", "kube-system/dns"}, true}}},
		{name: "a Service added, one without endpoints gone", start: []Service{noEndpoints},
			steps:    []step{{[]Service{noEndpoints, dnsA}, []string{"kube-system/dns"}, true}, {[]Service{dnsA}, []string{"default/web"}, true}},
			wantLast: []string{"-vips 192.0.2.10"}},
		{name: "a Service added that loses the port to the incumbent, then the incumbent gone: the loser not named takes the port", start: []Service{web2},
			steps: []step{{[]Service{web2, late}, []string{"default/zz-late"}, true}, {[]Service{late}, []string{"default/web"}, false}},
			wantLast: []string{
				"+endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.9 . 80",
				"+masquerade 192.0.2.10 . 6 . 80",
				"-endpoints_2 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"-endpoints_2 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
				"-masquerade 192.0.2.10 . 6 . 80",
				"map endpoints_1",
			}},
		{name: "a Service moved to another port, after another one claimed one: the loser takes the old port, the claims are undone first", start: []Service{web2, late},
			steps: []step{{[]Service{aaa, webMoved, late}, []string{"default/aaa", "default/web"}, false}}},
		{name: "a Service gone with its port, another one replacing it", start: []Service{web2, late},
			steps: []step{{[]Service{multi(), late}, []string{"default/multi", "default/web"}, false}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			hinted := planNFTables(IPv4, tc.start, nil).state
			plain := planNFTables(IPv4, tc.start, nil).state
			var last []string
			for i, s := range tc.steps {
				changed := map[string]bool{}
				for _, k := range s.changed {
					changed[k] = true
				}
				hp := planNFTablesChanged(IPv4, s.services, hinted, changed, nil)
				if (hp != nil) != s.inPlace {
					t.Fatalf("step %d: planned in place: %v, want %v", i, hp != nil, s.inPlace)
				}
				if hp == nil { // a port released: the ordered plan, as NFTables.sync does
					hp = planNFTablesReusing(IPv4, s.services, hinted, nil, changed, nil)
				}
				pp := planNFTables(IPv4, s.services, plain)
				if got, want := changes(hp), changes(pp); !slices.Equal(got, want) {
					t.Fatalf("step %d: told %v, the plan writes:\n%s\ncomparing all, it writes:\n%s", i, s.changed, strings.Join(got, "\n"), strings.Join(want, "\n"))
				}
				if !maps.Equal(hp.state.ports, pp.state.ports) || !maps.Equal(hp.state.vipRefs, pp.state.vipRefs) || len(hp.state.services) != len(pp.state.services) {
					t.Fatalf("step %d: the states differ: ports %v / %v, VIPs %v / %v", i, hp.state.ports, pp.state.ports, hp.state.vipRefs, pp.state.vipRefs)
				}
				hinted, plain, last = hp.state, pp.state, changes(hp)
			}
			if tc.wantLast != nil && !slices.Equal(last, tc.wantLast) {
				t.Fatalf("the last step writes:\n%s\nwant:\n%s", strings.Join(last, "\n"), strings.Join(tc.wantLast, "\n"))
			}
		})
	}
}
