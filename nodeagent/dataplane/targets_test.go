package dataplane

import (
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// Service fixtures for both planes' tests. Addresses come from the documentation ranges only.

func addrs(ss ...string) []netip.Addr {
	var out []netip.Addr
	for _, s := range ss {
		out = append(out, netip.MustParseAddr(s))
	}
	return out
}

func prefixes(ss ...string) []netip.Prefix {
	var out []netip.Prefix
	for _, s := range ss {
		out = append(out, netip.MustParsePrefix(s))
	}
	return out
}

// ep is a ready endpoint; ports are "name/PROTO/port" or "name/port" (TCP).
func ep(addr string, local bool, ports ...string) Endpoint {
	e := Endpoint{Addr: netip.MustParseAddr(addr), Local: local}
	for _, p := range ports {
		parts := strings.Split(p, "/")
		epp := EndpointPort{Name: parts[0], Protocol: TCP}
		if len(parts) == 3 {
			epp.Protocol = Protocol(parts[1])
		}
		epp.Port = uint16(atoi(parts[len(parts)-1]))
		e.Ports = append(e.Ports, epp)
	}
	return e
}

func atoi(s string) int {
	n := 0
	for _, c := range s {
		n = n*10 + int(c-'0')
	}
	return n
}

// web is default/web: VIP 192.0.2.10 and 2001:db8::10, port http 80 -> 8080.
func web(eps ...Endpoint) Service {
	return Service{Namespace: "default", Name: "web", VIPs: addrs("192.0.2.10", "2001:db8::10"),
		Ports: []Port{{Name: "http", Protocol: TCP, Port: 80}}, Endpoints: eps}
}

// dns is kube-system/dns: VIP 192.0.2.53, ports dns UDP 53 and dns-tcp TCP 53.
func dns(eps ...Endpoint) Service {
	return Service{Namespace: "kube-system", Name: "dns", VIPs: addrs("192.0.2.53"),
		Ports: []Port{{Name: "dns", Protocol: UDP, Port: 53}, {Name: "dns-tcp", Protocol: TCP, Port: 53}}, Endpoints: eps}
}

// TestPortTargets: the endpoints a Service port spreads over, the same for both planes.
func TestPortTargets(t *testing.T) {
	eps := []Endpoint{
		ep("198.51.100.2", false, "http/8080"),
		ep("198.51.100.1", true, "http/8080", "dns/UDP/5353"),
		ep("198.51.100.1", true, "http/8080"), // the same endpoint twice: once
		ep("198.51.100.3", false, "other/8080"),
		ep("198.51.100.4", false, "http/0"),     // no port number: unusable
		ep("2001:db8:1::1", false, "http/8080"), // the other family
		ep("198.51.100.5", false, "http/UDP/8080"),
		ep("198.51.100.6", false, "http/ICMP/8080"), // matched only by a port no plane can DNAT
	}
	http := Port{Name: "http", Protocol: "", Port: 80} // empty protocol: TCP
	for _, tc := range []struct {
		desc  string
		fam   Family
		local bool
		port  Port
		want  []string
	}{
		{desc: "cluster: every ready endpoint with the port's name and protocol, sorted, once", fam: IPv4, port: http,
			want: []string{"198.51.100.1:8080", "198.51.100.2:8080"}},
		{desc: "local: only this node's", fam: IPv4, local: true, port: http, want: []string{"198.51.100.1:8080"}},
		{desc: "protocol matters", fam: IPv4, port: Port{Name: "http", Protocol: UDP, Port: 80}, want: []string{"198.51.100.5:8080"}},
		{desc: "IPv6", fam: IPv6, port: http, want: []string{"[2001:db8:1::1]:8080"}},
		{desc: "no endpoint with the port", fam: IPv4, port: Port{Name: "none", Port: 1}},
		{desc: "a protocol no plane can DNAT", fam: IPv4, port: Port{Name: "http", Protocol: "ICMP", Port: 80}},
	} {
		s := Service{Endpoints: eps, Local: tc.local}
		scratch := []target{{}} // appended to, never overwritten
		got := appendPortTargets(scratch, tc.fam, &s, tc.port)
		var spelled []string
		for _, tg := range got[1:] {
			spelled = append(spelled, netip.AddrPortFrom(tg.addr, tg.port).String())
		}
		if got[0] != (target{}) || !slices.Equal(spelled, tc.want) {
			t.Errorf("%s: %v (kept %v), want %v", tc.desc, spelled, got[0], tc.want)
		}
	}
}

// TestReachable: a Service is served in a family when it has a VIP of it and its source
// ranges, if any, name someone of it.
func TestReachable(t *testing.T) {
	for _, tc := range []struct {
		desc   string
		s      Service
		v4, v6 bool
	}{
		{desc: "both families", s: web(), v4: true, v6: true},
		{desc: "IPv4 only", s: dns(), v4: true},
		{desc: "ranges of one family", s: Service{VIPs: addrs("192.0.2.10", "2001:db8::10"), SourceRanges: prefixes("2001:db8:2::/48")}, v6: true},
		{desc: "an IPv4-mapped VIP counts as IPv4", s: Service{VIPs: addrs("::ffff:192.0.2.10")}, v4: true},
		{desc: "closed: nobody, whatever the ranges", s: Service{VIPs: addrs("192.0.2.10", "2001:db8::10"), SourceRanges: prefixes("203.0.113.0/24", "2001:db8:2::/48"), Closed: true}},
		{desc: "closed with no range left: nobody, not everyone", s: Service{VIPs: addrs("192.0.2.10", "2001:db8::10"), Closed: true}},
	} {
		if v4, v6 := reachable(IPv4, &tc.s), reachable(IPv6, &tc.s); v4 != tc.v4 || v6 != tc.v6 {
			t.Errorf("%s: IPv4 %v IPv6 %v, want %v %v", tc.desc, v4, v6, tc.v4, tc.v6)
		}
	}
}

// TestDisjointRanges: nested ranges collapse into the widest (an interval set refuses
// overlaps), masked, of the family asked for.
func TestDisjointRanges(t *testing.T) {
	in := prefixes("203.0.113.0/28", "203.0.113.7/24", "198.51.100.0/24", "203.0.113.64/26", "2001:db8::/32")
	got := disjointRanges(IPv4, in)
	want := prefixes("198.51.100.0/24", "203.0.113.0/24")
	if !slices.Equal(got, want) {
		t.Errorf("IPv4: %v, want %v", got, want)
	}
	if got := disjointRanges(IPv6, in); !slices.Equal(got, prefixes("2001:db8::/32")) {
		t.Errorf("IPv6: %v", got)
	}
}
