package dataplane

import (
	"strings"
	"testing"
	"time"
)

// TestRenderAffinity: a port of a Service with session affinity sends a client back to the
// endpoint its recent list holds, and records the endpoint a random rule picks.
func TestRenderAffinity(t *testing.T) {
	sticky := web(ep("198.51.100.2", false, "http/8080"), ep("198.51.100.1", false, "http/8080"))
	sticky.Affinity = 3 * time.Hour
	chain := svcChainName("default", "web", sticky.Ports[0], IPv4)
	one := recentListName(chain, target{addr: addrs("198.51.100.1")[0], port: 8080})
	two := recentListName(chain, target{addr: addrs("198.51.100.2")[0], port: 8080})
	nat := `:{default/web:http/TCP} - [0:0]
-A {default/web:http/TCP} -j VIPA-MARK-MASQ
-A {default/web:http/TCP} -p tcp -m recent --name ONE --rcheck --seconds 10800 --reap -m recent --name ONE --set -j DNAT --to-destination 198.51.100.1:8080
-A {default/web:http/TCP} -p tcp -m recent --name TWO --rcheck --seconds 10800 --reap -m recent --name TWO --set -j DNAT --to-destination 198.51.100.2:8080
-A {default/web:http/TCP} -p tcp -m statistic --mode random --probability 0.5000000000 -m recent --name ONE --set -j DNAT --to-destination 198.51.100.1:8080
-A {default/web:http/TCP} -p tcp -m recent --name TWO --set -j DNAT --to-destination 198.51.100.2:8080
-A VIPA-SERVICES -d 192.0.2.10/32 -p tcp -m comment --comment "default/web:http" -m tcp --dport 80 -j {default/web:http/TCP}
`
	nat = strings.NewReplacer("ONE", one, "TWO", two).Replace(nat)
	got := render(renderInput{Family: IPv4, Mark: 0x200000, RandomFully: true, Services: []Service{sticky}})
	checkPayload(t, "affinity", got.Payload, expand(fullPayload(filterFor("192.0.2.10"), nat), IPv4))
	checkCounts(t, "affinity", got)
	if len(one) > 28 || !strings.HasPrefix(one, recentStem) || one == two {
		t.Errorf("recent list names %q and %q: want distinct, %s..., at most 28 characters", one, two, recentStem)
	}

	// Switched off: the rules, and with them the lists, are gone; the chain is rewritten.
	last := got.State
	sticky.Affinity = 0
	off := render(renderInput{Family: IPv4, Mark: 0x200000, RandomFully: true, Services: []Service{sticky}, Last: last})
	if strings.Contains(off.Payload, "recent") || !strings.Contains(off.Payload, "-m statistic") {
		t.Errorf("affinity switched off, payload:\n%s", off.Payload)
	}
}
