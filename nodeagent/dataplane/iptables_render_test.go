package dataplane

import (
	"fmt"
	"regexp"
	"slices"
	"strings"
	"testing"
)

// chainRef is how tests spell a Service port chain: {ns/name:port/PROTO}.
var chainRef = regexp.MustCompile(`\{([^/{}]+)/([^:{}]+):([^/{}]*)/([A-Z]+)\}`)

// renderOneCase is one full render: its Services and the rules it writes.
type renderOneCase struct {
	desc     string
	fam      Family
	services []Service
	filter   string // VIPA-FILTER rules
	nat      string // nat rules after the fixed chains
}

// localService is s with externalTrafficPolicy Local.
func localService(s Service) Service { s.Local = true; return s }

// renderOneCases are TestRenderOne's renders.
var renderOneCases = []renderOneCase{{
	desc: "cluster: masquerade, then spread evenly over every ready endpoint",
	fam:  IPv4,
	services: []Service{web(
		ep("198.51.100.3", false, "http/8080"),
		ep("198.51.100.1", true, "http/8080"),
		ep("198.51.100.2", false, "http/8080"),
	)},
	filter: filterFor("192.0.2.10"),
	nat: `:{default/web:http/TCP} - [0:0]
-A {default/web:http/TCP} -j VIPA-MARK-MASQ
-A {default/web:http/TCP} -p tcp -m statistic --mode random --probability 0.3333333333 -j DNAT --to-destination 198.51.100.1:8080
-A {default/web:http/TCP} -p tcp -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 198.51.100.2:8080
-A {default/web:http/TCP} -p tcp -j DNAT --to-destination 198.51.100.3:8080
-A VIPA-SERVICES -d 192.0.2.10/32 -p tcp -m comment --comment "default/web:http" -m tcp --dport 80 -j {default/web:http/TCP}
`,
}, {
	desc: "local: only this node's endpoints, source kept except hairpin",
	fam:  IPv4,
	services: []Service{localService(web(
		ep("198.51.100.1", true, "http/8080"),
		ep("198.51.100.2", true, "http/8080"),
		ep("198.51.100.3", false, "http/8080"),
	))},
	filter: filterFor("192.0.2.10"),
	nat: `:{default/web:http/TCP} - [0:0]
-A {default/web:http/TCP} -s 198.51.100.1/32 -j VIPA-MARK-MASQ
-A {default/web:http/TCP} -s 198.51.100.2/32 -j VIPA-MARK-MASQ
-A {default/web:http/TCP} -p tcp -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 198.51.100.1:8080
-A {default/web:http/TCP} -p tcp -j DNAT --to-destination 198.51.100.2:8080
-A VIPA-SERVICES -d 192.0.2.10/32 -p tcp -m comment --comment "default/web:http" -m tcp --dport 80 -j {default/web:http/TCP}
`,
}, {
	desc:     "local without a local endpoint: no chain, no jump, the VIP still rejects",
	fam:      IPv4,
	services: []Service{localService(web(ep("198.51.100.3", false, "http/8080")))},
	filter:   filterFor("192.0.2.10"),
}, {
	desc:     "no endpoint at all: no chain, no jump, the VIP still rejects",
	fam:      IPv4,
	services: []Service{web()},
	filter:   filterFor("192.0.2.10"),
}, {
	desc:     "several ports and protocols; named ports resolve per endpoint; unusable ports get nothing",
	fam:      IPv4,
	services: []Service{multi()},
	filter:   filterFor("192.0.2.20"),
	nat: `:{default/multi:sctp/SCTP} - [0:0]
-A {default/multi:sctp/SCTP} -j VIPA-MARK-MASQ
-A {default/multi:sctp/SCTP} -p sctp -j DNAT --to-destination 198.51.100.1:9001
-A VIPA-SERVICES -d 192.0.2.20/32 -p sctp -m comment --comment "default/multi:sctp" -m sctp --dport 9000 -j {default/multi:sctp/SCTP}
:{default/multi:http/TCP} - [0:0]
-A {default/multi:http/TCP} -j VIPA-MARK-MASQ
-A {default/multi:http/TCP} -p tcp -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 198.51.100.1:8080
-A {default/multi:http/TCP} -p tcp -j DNAT --to-destination 198.51.100.2:8081
-A VIPA-SERVICES -d 192.0.2.20/32 -p tcp -m comment --comment "default/multi:http" -m tcp --dport 80 -j {default/multi:http/TCP}
:{default/multi:dns/UDP} - [0:0]
-A {default/multi:dns/UDP} -j VIPA-MARK-MASQ
-A {default/multi:dns/UDP} -p udp -j DNAT --to-destination 198.51.100.1:5353
-A VIPA-SERVICES -d 192.0.2.20/32 -p udp -m comment --comment "default/multi:dns" -m udp --dport 53 -j {default/multi:dns/UDP}
`,
}, {
	desc: "an unnamed port is named by its number in the comment",
	fam:  IPv4,
	services: []Service{{Namespace: "default", Name: "multi", VIPs: addrs("192.0.2.20"),
		Ports:     []Port{{Port: 7000}}, // protocol defaults to TCP
		Endpoints: []Endpoint{ep("198.51.100.1", false, "/7001")}}},
	filter: filterFor("192.0.2.20"),
	nat: `:{default/multi:/TCP} - [0:0]
-A {default/multi:/TCP} -j VIPA-MARK-MASQ
-A {default/multi:/TCP} -p tcp -j DNAT --to-destination 198.51.100.1:7001
-A VIPA-SERVICES -d 192.0.2.20/32 -p tcp -m comment --comment "default/multi:7000" -m tcp --dport 7000 -j {default/multi:/TCP}
`,
}, {
	desc:     "source ranges: one jump per allowed range of the family, others fall through to the reject",
	fam:      IPv4,
	services: []Service{fw("203.0.113.7/24", "198.51.100.128/25", "2001:db8::/32")},
	filter:   filterFor("192.0.2.30"),
	nat: `:{default/fw:http/TCP} - [0:0]
-A {default/fw:http/TCP} -j VIPA-MARK-MASQ
-A {default/fw:http/TCP} -p tcp -j DNAT --to-destination 198.51.100.1:8080
-A VIPA-SERVICES -s 203.0.113.0/24 -d 192.0.2.30/32 -p tcp -m comment --comment "default/fw:http" -m tcp --dport 80 -j {default/fw:http/TCP}
-A VIPA-SERVICES -s 198.51.100.128/25 -d 192.0.2.30/32 -p tcp -m comment --comment "default/fw:http" -m tcp --dport 80 -j {default/fw:http/TCP}
`,
}, {
	desc:     "source ranges only of the other family: nobody of this family may connect",
	fam:      IPv4,
	services: []Service{fw("2001:db8::/32")},
	filter:   filterFor("192.0.2.30"),
}, {
	desc:     "closed (a source range that does not parse): nobody may connect, in either family",
	fam:      IPv4,
	services: []Service{closed(fw("203.0.113.0/24"))},
	filter:   filterFor("192.0.2.30"),
}, {
	desc:     "closed without any parsable range: still nobody, never everyone",
	fam:      IPv6,
	services: []Service{closed(fw())},
	filter:   filterFor("2001:db8::30"),
}, {
	desc:     "IPv6: /128, [addr]:port, icmp6; IPv4 VIPs, ranges and endpoints are skipped",
	fam:      IPv6,
	services: []Service{fw("2001:db8::/32", "203.0.113.0/24")},
	filter:   filterFor("2001:db8::30"),
	nat: `:{default/fw:http/TCP} - [0:0]
-A {default/fw:http/TCP} -j VIPA-MARK-MASQ
-A {default/fw:http/TCP} -p tcp -j DNAT --to-destination [2001:db8:1::1]:8080
-A VIPA-SERVICES -s 2001:db8::/32 -d 2001:db8::30/128 -p tcp -m comment --comment "default/fw:http" -m tcp --dport 80 -j {default/fw:http/TCP}
`,
}, {
	desc: "IPv6 local: hairpin per /128",
	fam:  IPv6,
	services: []Service{localService(web(
		ep("2001:db8:1::2", true, "http/8080"),
		ep("2001:db8:1::1", true, "http/8080"),
		ep("198.51.100.1", true, "http/8080"),
	))},
	filter: filterFor("2001:db8::10"),
	nat: `:{default/web:http/TCP} - [0:0]
-A {default/web:http/TCP} -s 2001:db8:1::1/128 -j VIPA-MARK-MASQ
-A {default/web:http/TCP} -s 2001:db8:1::2/128 -j VIPA-MARK-MASQ
-A {default/web:http/TCP} -p tcp -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination [2001:db8:1::1]:8080
-A {default/web:http/TCP} -p tcp -j DNAT --to-destination [2001:db8:1::2]:8080
-A VIPA-SERVICES -d 2001:db8::10/128 -p tcp -m comment --comment "default/web:http" -m tcp --dport 80 -j {default/web:http/TCP}
`,
}, {
	desc: "Services sharing a VIP on different ports: the filter names it once",
	fam:  IPv4,
	services: []Service{
		web(ep("198.51.100.1", false, "http/8080")),
		{Namespace: "default", Name: "web2", VIPs: addrs("192.0.2.10"), Ports: []Port{{Name: "http", Protocol: TCP, Port: 8080}},
			Endpoints: []Endpoint{ep("198.51.100.2", false, "http/80")}},
	},
	filter: filterFor("192.0.2.10"),
	nat: `:{default/web2:http/TCP} - [0:0]
-A {default/web2:http/TCP} -j VIPA-MARK-MASQ
-A {default/web2:http/TCP} -p tcp -j DNAT --to-destination 198.51.100.2:80
-A VIPA-SERVICES -d 192.0.2.10/32 -p tcp -m comment --comment "default/web2:http" -m tcp --dport 8080 -j {default/web2:http/TCP}
:{default/web:http/TCP} - [0:0]
-A {default/web:http/TCP} -j VIPA-MARK-MASQ
-A {default/web:http/TCP} -p tcp -j DNAT --to-destination 198.51.100.1:8080
-A VIPA-SERVICES -d 192.0.2.10/32 -p tcp -m comment --comment "default/web:http" -m tcp --dport 80 -j {default/web:http/TCP}
`,
}, {
	desc:     "a Service without a VIP of the family: nothing at all",
	fam:      IPv4,
	services: []Service{{Namespace: "default", Name: "v6only", VIPs: addrs("2001:db8::99"), Ports: []Port{{Name: "http", Port: 80}}, Endpoints: []Endpoint{ep("198.51.100.1", false, "http/80")}}},
}}

// TestRenderOne covers the rules of one full render each.
func TestRenderOne(t *testing.T) {
	for _, tc := range renderOneCases {
		t.Run(tc.desc, func(t *testing.T) {
			got := render(renderInput{Family: tc.fam, Mark: 0x200000, RandomFully: true, Services: tc.services})
			checkPayload(t, tc.desc, got.Payload, expand(fullPayload(tc.filter, tc.nat), tc.fam))
			checkCounts(t, tc.desc, got)
		})
	}
}

func TestRenderWithoutRandomFully(t *testing.T) {
	got := render(renderInput{Family: IPv4, Mark: 0x4000 << 1, Services: []Service{web()}}).Payload
	for _, line := range []string{
		"-A VIPA-MARK-MASQ -j MARK --or-mark 0x8000\n",
		"-A VIPA-POSTROUTING -m mark ! --mark 0x8000/0x8000 -j RETURN\n",
		"-A VIPA-POSTROUTING -j MASQUERADE\n",
	} {
		if !strings.Contains(got, line) {
			t.Errorf("payload lacks %q:\n%s", line, got)
		}
	}
}

// TestRenderSteps follows one Dataplane's state through partial and full Syncs: each step
// renders against the state the previous one left.
func TestRenderSteps(t *testing.T) {
	webEPs := []Endpoint{ep("198.51.100.1", false, "http/8080"), ep("198.51.100.2", false, "http/8080")}
	dnsEP := ep("198.51.100.3", false, "dns/UDP/53", "dns-tcp/53")
	steps := []struct {
		desc     string
		services []Service
		full     bool
		existing map[string][]string // VIPA- chains found in iptables (full only)
		want     string
	}{{
		desc:     "first sync is full: Service chains in descending name order, each with its jumps",
		services: []Service{dns(dnsEP), web(webEPs...)},
		full:     true,
		want: fullPayload(filterFor("192.0.2.10", "192.0.2.53"), `:{kube-system/dns:dns-tcp/TCP} - [0:0]
-A {kube-system/dns:dns-tcp/TCP} -j VIPA-MARK-MASQ
-A {kube-system/dns:dns-tcp/TCP} -p tcp -j DNAT --to-destination 198.51.100.3:53
-A VIPA-SERVICES -d 192.0.2.53/32 -p tcp -m comment --comment "kube-system/dns:dns-tcp" -m tcp --dport 53 -j {kube-system/dns:dns-tcp/TCP}
:{kube-system/dns:dns/UDP} - [0:0]
-A {kube-system/dns:dns/UDP} -j VIPA-MARK-MASQ
-A {kube-system/dns:dns/UDP} -p udp -j DNAT --to-destination 198.51.100.3:53
-A VIPA-SERVICES -d 192.0.2.53/32 -p udp -m comment --comment "kube-system/dns:dns" -m udp --dport 53 -j {kube-system/dns:dns/UDP}
:{default/web:http/TCP} - [0:0]
-A {default/web:http/TCP} -j VIPA-MARK-MASQ
-A {default/web:http/TCP} -p tcp -m statistic --mode random --probability 0.5000000000 -j DNAT --to-destination 198.51.100.1:8080
-A {default/web:http/TCP} -p tcp -j DNAT --to-destination 198.51.100.2:8080
-A VIPA-SERVICES -d 192.0.2.10/32 -p tcp -m comment --comment "default/web:http" -m tcp --dport 80 -j {default/web:http/TCP}
`),
	}, {
		desc:     "nothing changed: nothing to write, not even the fixed chains",
		services: []Service{web(webEPs...), dns(dnsEP)},
	}, {
		desc:     "web loses an endpoint: only its chain is rewritten",
		services: []Service{dns(dnsEP), web(webEPs[1])},
		want: `*nat
:{default/web:http/TCP} - [0:0]
-A {default/web:http/TCP} -j VIPA-MARK-MASQ
-A {default/web:http/TCP} -p tcp -j DNAT --to-destination 198.51.100.2:8080
COMMIT
`,
	}, {
		desc:     "web's endpoints are listed in another order: same rules, nothing to write",
		services: []Service{dns(dnsEP), web(webEPs[1], ep("2001:db8:1::1", false, "http/8080"))},
	}, {
		desc:     "dns loses its TCP endpoint port: VIPA-SERVICES is flushed first, then the chain deleted",
		services: []Service{dns(ep("198.51.100.3", false, "dns/UDP/53")), web(webEPs[1])},
		want: `*nat
:VIPA-SERVICES - [0:0]
:{kube-system/dns:dns-tcp/TCP} - [0:0]
-X {kube-system/dns:dns-tcp/TCP}
:{kube-system/dns:dns/UDP} - [0:0]
-A {kube-system/dns:dns/UDP} -j VIPA-MARK-MASQ
-A {kube-system/dns:dns/UDP} -p udp -j DNAT --to-destination 198.51.100.3:53
-A VIPA-SERVICES -d 192.0.2.53/32 -p udp -m comment --comment "kube-system/dns:dns" -m udp --dport 53 -j {kube-system/dns:dns/UDP}
-A VIPA-SERVICES -d 192.0.2.10/32 -p tcp -m comment --comment "default/web:http" -m tcp --dport 80 -j {default/web:http/TCP}
COMMIT
`,
	}, {
		desc:     "web goes away: its chain is deleted and its VIP no longer rejected",
		services: []Service{dns(ep("198.51.100.3", false, "dns/UDP/53"))},
		want: `*filter
:VIPA-FILTER - [0:0]
` + filterFor("192.0.2.53") + `COMMIT
*nat
:VIPA-SERVICES - [0:0]
-A VIPA-SERVICES -d 192.0.2.53/32 -p udp -m comment --comment "kube-system/dns:dns" -m udp --dport 53 -j {kube-system/dns:dns/UDP}
:{default/web:http/TCP} - [0:0]
-X {default/web:http/TCP}
COMMIT
`,
	}, {
		desc:     "full resync: every VIPA- chain in iptables that is not rendered is deleted",
		services: []Service{dns(ep("198.51.100.3", false, "dns/UDP/53"))},
		full:     true,
		existing: map[string][]string{
			"filter": {"VIPA-FILTER", "VIPA-CANARY", "VIPA-OLD-FILTER"},
			"nat":    {"VIPA-SERVICES", "VIPA-SVC-AAAAAAAAAAAAAAAA", "{kube-system/dns:dns/UDP}", "VIPA-OLD", "VIPA-SVC-ZZZZZZZZZZZZZZZZ"},
		},
		want: `*filter
:VIPA-OLD-FILTER - [0:0]
:VIPA-FILTER - [0:0]
:VIPA-CANARY - [0:0]
-A VIPA-CANARY -j RETURN
` + filterFor("192.0.2.53") + `-X VIPA-OLD-FILTER
COMMIT
*nat
:VIPA-OLD - [0:0]
` + strings.TrimPrefix(fullPayload("", `:VIPA-SVC-ZZZZZZZZZZZZZZZZ - [0:0]
-X VIPA-SVC-ZZZZZZZZZZZZZZZZ
:{kube-system/dns:dns/UDP} - [0:0]
-A {kube-system/dns:dns/UDP} -j VIPA-MARK-MASQ
-A {kube-system/dns:dns/UDP} -p udp -j DNAT --to-destination 198.51.100.3:53
-A VIPA-SERVICES -d 192.0.2.53/32 -p udp -m comment --comment "kube-system/dns:dns" -m udp --dport 53 -j {kube-system/dns:dns/UDP}
:VIPA-SVC-AAAAAAAAAAAAAAAA - [0:0]
-X VIPA-SVC-AAAAAAAAAAAAAAAA
-X VIPA-OLD
`), "*filter\n:VIPA-FILTER - [0:0]\n:VIPA-CANARY - [0:0]\n-A VIPA-CANARY -j RETURN\nCOMMIT\n*nat\n"),
	}}
	var last *syncState
	for i, s := range steps {
		in := renderInput{Family: IPv4, Mark: 0x200000, RandomFully: true, Services: s.services, Last: last}
		if s.full {
			in.Last = nil
			in.Existing = map[string][]string{}
			for table, chains := range s.existing {
				for _, c := range chains {
					in.Existing[table] = append(in.Existing[table], expand(c, IPv4))
				}
			}
		}
		got := render(in)
		desc := fmt.Sprintf("step %d (%s)", i+1, s.desc)
		checkPayload(t, desc, got.Payload, expand(s.want, IPv4))
		checkCounts(t, desc, got)
		last = got.State
	}
}

func TestDeletePayload(t *testing.T) {
	got := string(deletePayload(map[string][]string{
		"nat":    {"VIPA-SVC-AAAAAAAAAAAAAAAA", "VIPA-SERVICES", "VIPA-SVC-BBBBBBBBBBBBBBBB", "VIPA-MARK-MASQ"},
		"filter": {"VIPA-FILTER"},
	}))
	// Chains that may jump to others are flushed first and deleted last; Service chains,
	// jumped to only, go one by one in descending order in between.
	want := `*filter
:VIPA-FILTER - [0:0]
-X VIPA-FILTER
COMMIT
*nat
:VIPA-SERVICES - [0:0]
:VIPA-MARK-MASQ - [0:0]
:VIPA-SVC-BBBBBBBBBBBBBBBB - [0:0]
-X VIPA-SVC-BBBBBBBBBBBBBBBB
:VIPA-SVC-AAAAAAAAAAAAAAAA - [0:0]
-X VIPA-SVC-AAAAAAAAAAAAAAAA
-X VIPA-SERVICES
-X VIPA-MARK-MASQ
COMMIT
`
	checkPayload(t, "delete", got, want)
	if deletePayload(map[string][]string{"nat": nil}) != nil {
		t.Error("payload for nothing to delete")
	}
}

func TestChainNames(t *testing.T) {
	// Names must stay stable across versions (a restarted agent rewrites the same chains)
	// and within iptables' 28 characters.
	got := svcChainName("default", "web", Port{Name: "http", Protocol: TCP, Port: 80}, IPv4)
	if got != "VIPA-SVC-DRUWM6MEEL6AWIQW" {
		t.Errorf("chain name changed: %s", got)
	}
	if other := svcChainName("default", "web", Port{Name: "http", Port: 8080}, IPv4); other != got {
		t.Errorf("port number or default protocol changed the name: %s", other)
	}
	if v6 := svcChainName("default", "web", Port{Name: "http", Protocol: TCP}, IPv6); v6 == got || len(v6) > 28 {
		t.Errorf("IPv6 name %s", v6)
	}
}

func TestSplitRuleAndJumps(t *testing.T) {
	rule := `-A PREROUTING -m comment --comment "vip-allocator service VIPs" -j VIPA-SERVICES`
	want := []string{"-A", "PREROUTING", "-m", "comment", "--comment", "vip-allocator service VIPs", "-j", "VIPA-SERVICES"}
	if got := SplitRule(rule); !slices.Equal(got, want) {
		t.Errorf("SplitRule = %q", got)
	}
	if got := SplitRule(`-A X --comment "a \"quoted\" word" -j Y`); got[3] != `a "quoted" word` {
		t.Errorf("SplitRule escapes = %q", got)
	}
	for _, tc := range []struct {
		j    jump
		rule string
		want bool
	}{
		{jumps[0], rule, true},
		{jumps[0], "-A PREROUTING -j VIPA-SERVICES", true}, // someone else's spelling counts
		{jumps[1], rule, false},                            // OUTPUT
		{jumps[0], "-A PREROUTING -j VIPA-SERVICES-X", false},
	} {
		if got := tc.j.matches(tc.rule); got != tc.want {
			t.Errorf("%v matches %q = %v", tc.j, tc.rule, got)
		}
	}
}

func TestLineCatcher(t *testing.T) {
	lc := &lineCatcher{want: 2}
	lc.WriteString("*nat\n:A - [0:0]\n-A A -j")
	lc.Write([]byte(" RETURN\nCOMMIT\n"))
	if lc.line.String() != ":A - [0:0]" {
		t.Errorf("line 2 = %q", lc.line.String())
	}
}

func TestRenderInsertsMissingJumps(t *testing.T) {
	got := render(renderInput{Family: IPv4, Mark: 0x200000, RandomFully: true, Services: []Service{web()},
		MissingJumps: []jump{jumps[0], jumps[3]}})
	// Last in each table, once our chains are declared.
	for _, want := range []string{
		"-I INPUT 1 -m comment --comment \"vip-allocator service VIPs\" -j VIPA-FILTER\nCOMMIT\n*nat\n",
		"-I PREROUTING 1 -m comment --comment \"vip-allocator service VIPs\" -j VIPA-SERVICES\nCOMMIT\n",
	} {
		if !strings.Contains(got.Payload, want) {
			t.Errorf("payload lacks %q:\n%s", want, got.Payload)
		}
	}
	checkCounts(t, "missing jumps", rendered{Payload: strings.ReplaceAll(got.Payload, "\n-I ", "\n-A "), Rules: got.Rules, Chains: got.Chains})
}
