package nodes

import (
	"net/netip"
	"os"
	"os/exec"
	"slices"
	"testing"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
)

// TestLocalInterfacesPublishGateways: in a namespace of its own, a node with
// an IPv4 default route, an IPv6 one over two next hops (ECMP) and a link
// with no default route publishes each gateway on the interface it leaves
// through, and none on the other.
func TestLocalInterfacesPublishGateways(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to create network namespaces")
	}
	_, leave, err := netnstest.Enter("vipa-gw")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leave() })
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("sysctl", "-qw", "net.ipv6.conf.default.accept_dad=0")
	for _, link := range []string{"lan0", "lan1"} {
		run("ip", "link", "add", link, "type", "veth", "peer", "name", link+"p")
		run("ip", "link", "set", link+"p", "up")
		run("ip", "link", "set", link, "up")
	}
	run("ip", "addr", "add", "192.0.2.11/24", "dev", "lan0")
	run("ip", "addr", "add", "2001:db8::11/64", "dev", "lan0")
	run("ip", "addr", "add", "198.51.100.11/24", "dev", "lan1")
	run("ip", "route", "add", "default", "via", "192.0.2.1", "dev", "lan0")
	run("ip", "-6", "route", "add", "default", "nexthop", "via", "2001:db8::2", "dev", "lan0", "nexthop", "via", "2001:db8::1", "dev", "lan0")
	run("ip", "route", "add", "203.0.113.0/24", "via", "198.51.100.1", "dev", "lan1") // not a default route

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
