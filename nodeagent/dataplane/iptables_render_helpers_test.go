package dataplane

import (
	"strings"
	"testing"
)

func expand(s string, fam Family) string {
	return chainRef.ReplaceAllStringFunc(s, func(ref string) string {
		m := chainRef.FindStringSubmatch(ref)
		return svcChainName(m[1], m[2], Port{Name: m[3], Protocol: Protocol(m[4])}, fam)
	})
}

// fullPayload is a full Sync's payload around the given VIPA-FILTER rules and nat body.
func fullPayload(filterRules, natBody string) string {
	return "*filter\n:VIPA-FILTER - [0:0]\n:VIPA-CANARY - [0:0]\n-A VIPA-CANARY -j RETURN\n" + filterRules + "COMMIT\n" +
		"*nat\n:VIPA-SERVICES - [0:0]\n:VIPA-POSTROUTING - [0:0]\n:VIPA-MARK-MASQ - [0:0]\n:VIPA-CANARY - [0:0]\n" +
		"-A VIPA-CANARY -j RETURN\n" +
		"-A VIPA-MARK-MASQ -j MARK --or-mark 0x200000\n" +
		"-A VIPA-POSTROUTING -m mark ! --mark 0x200000/0x200000 -j RETURN\n" +
		"-A VIPA-POSTROUTING -j MARK --xor-mark 0x200000\n" +
		"-A VIPA-POSTROUTING -j MASQUERADE --random-fully\n" +
		natBody + "COMMIT\n"
}

// filterFor is VIPA-FILTER's rules: one letting untracked packets (handoff copies) pass, then
// three for each VIP.
func filterFor(vips ...string) string {
	var b strings.Builder
	if len(vips) > 0 {
		b.WriteString("-A VIPA-FILTER -m conntrack --ctstate UNTRACKED -j RETURN\n")
	}
	for _, v := range vips {
		bits, reject := "/32", "icmp-port-unreachable"
		if strings.Contains(v, ":") {
			bits, reject = "/128", "icmp6-port-unreachable"
		}
		b.WriteString("-A VIPA-FILTER -d " + v + bits + " -p tcp -j REJECT --reject-with tcp-reset\n")
		b.WriteString("-A VIPA-FILTER -d " + v + bits + " -j REJECT --reject-with " + reject + "\n")
		b.WriteString("-A VIPA-FILTER -m conntrack --ctorigdst " + v + bits + " -j ACCEPT\n")
	}
	return b.String()
}

// checkCounts checks that the rule and chain counts a render reports match its payload.
func checkCounts(t *testing.T, desc string, got rendered) {
	t.Helper()
	rules := strings.Count("\n"+got.Payload, "\n-A ")
	chains := strings.Count("\n"+got.Payload, "\n:")
	if got.Rules != rules || got.Chains != chains {
		t.Errorf("%s: counted %d rules %d chains, payload has %d and %d", desc, got.Rules, got.Chains, rules, chains)
	}
}

func checkPayload(t *testing.T, desc, got, want string) {
	t.Helper()
	if got == want {
		return
	}
	gl, wl := strings.Split(got, "\n"), strings.Split(want, "\n")
	for i := 0; i < len(gl) || i < len(wl); i++ {
		var g, w string
		if i < len(gl) {
			g = gl[i]
		}
		if i < len(wl) {
			w = wl[i]
		}
		if g != w {
			t.Errorf("%s: payload differs at line %d:\n got: %s\nwant: %s\n\nwhole payload:\n%s", desc, i+1, g, w, got)
			return
		}
	}
}

// multi is default/multi (VIP 192.0.2.20): several ports and protocols, endpoints that
// resolve a named port to different numbers, and ports that endpoints lack.
func multi() Service {
	return Service{Namespace: "default", Name: "multi", VIPs: addrs("192.0.2.20"),
		Ports: []Port{
			{Name: "http", Protocol: TCP, Port: 80},
			{Name: "https", Protocol: TCP, Port: 443}, // no endpoint has it
			{Name: "dns", Protocol: UDP, Port: 53},
			{Name: "sctp", Protocol: SCTP, Port: 9000},
			{Name: "ping", Protocol: "ICMP", Port: 1}, // not a protocol iptables can DNAT
		},
		Endpoints: []Endpoint{
			ep("198.51.100.1", false, "http/8080", "dns/UDP/5353", "sctp/SCTP/9001", "ping/ICMP/1"),
			ep("198.51.100.2", false, "http/8081", "dns/TCP/5353"), // named port resolves to 8081; dns only over TCP
			ep("2001:db8:1::1", false, "http/8080"),                // other family
		},
	}
}

// fw is default/fw (VIPs 192.0.2.30, 2001:db8::30) open to some source ranges only.
func fw(ranges ...string) Service {
	return Service{Namespace: "default", Name: "fw", VIPs: addrs("192.0.2.30", "2001:db8::30"),
		Ports:        []Port{{Name: "http", Protocol: TCP, Port: 80}},
		SourceRanges: prefixes(ranges...),
		Endpoints:    []Endpoint{ep("198.51.100.1", false, "http/8080"), ep("2001:db8:1::1", false, "http/8080")},
	}
}

// closed is s with source ranges that did not parse.
func closed(s Service) Service { s.Closed = true; return s }
