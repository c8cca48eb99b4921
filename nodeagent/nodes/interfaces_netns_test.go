//go:build root

package nodes

import (
	"net/netip"
	"slices"
	"testing"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
)

// TestLocalInterfacesPublishGateways: in a namespace of its own, a node with
// an IPv4 default route, an IPv6 one over two next hops (ECMP) and a link
// with no default route publishes each gateway on the interface it leaves
// through, and none on the other.
func TestLocalInterfacesPublishGateways(t *testing.T) {
	netnstest.EnterTest(t, "vipa-gw")
	netnstest.NoDAD(t, "")
	for _, link := range []string{"lan0", "lan1"} {
		netnstest.Veth(t, link, "", link+"p")
	}
	netnstest.Run(t, "ip", "addr", "add", "192.0.2.11/24", "dev", "lan0")
	netnstest.Run(t, "ip", "addr", "add", "2001:db8::11/64", "dev", "lan0")
	netnstest.Run(t, "ip", "addr", "add", "198.51.100.11/24", "dev", "lan1")
	netnstest.Run(t, "ip", "route", "add", "default", "via", "192.0.2.1", "dev", "lan0")
	netnstest.Run(t, "ip", "-6", "route", "add", "default", "nexthop", "via", "2001:db8::2", "dev", "lan0", "nexthop", "via", "2001:db8::1", "dev", "lan0")
	netnstest.Run(t, "ip", "route", "add", "203.0.113.0/24", "via", "198.51.100.1", "dev", "lan1") // not a default route

	ifaces, err := LocalInterfaces()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string][]netip.Addr{}
	for _, ifc := range ifaces {
		got[ifc.Name] = ifc.Gateways
	}
	want := []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")}
	if !slices.Equal(got["lan0"], want) {
		t.Errorf("lan0 gateways %v, want %v", got["lan0"], want)
	}
	if _, ok := got["lan1"]; !ok || len(got["lan1"]) != 0 {
		t.Errorf("lan1: published %v (present %v), want the interface with no gateway", got["lan1"], ok)
	}
}
