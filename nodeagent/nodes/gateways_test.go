package nodes

import (
	"fmt"
	"net/netip"
	"reflect"
	"testing"

	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/nodeagent/returnpath"
)

// TestDefaultGateways: only default routes' next hops count, each on the
// interface it leaves by, a multipath route's every hop, both families,
// sorted and each once; a hop with no router or no interface is none; an
// interface keeps at most the NodeView's 16.
func TestDefaultGateways(t *testing.T) {
	hop := func(link int, gw string) returnpath.Hop {
		h := returnpath.Hop{Link: link}
		if gw != "" {
			h.Gateway = netip.MustParseAddr(gw)
		}
		return h
	}
	routes := []returnpath.Route{
		{Family: allocator.IPv4, Default: true, Link: 2, Hops: []returnpath.Hop{hop(2, "192.0.2.1")}},
		{Family: allocator.IPv4, Link: 3, Hops: []returnpath.Hop{hop(3, "198.51.100.1")}}, // not a default route
		{Family: allocator.IPv4, Link: 3, Default: true, Metric: 200, Hops: []returnpath.Hop{hop(3, "")}},
		{Family: allocator.IPv6, Default: true, Hops: []returnpath.Hop{hop(0, ""), hop(2, "2001:db8::2"), hop(2, "2001:db8::1")}},
		{Family: allocator.IPv6, Default: true, Metric: 2048, Link: 2, Hops: []returnpath.Hop{hop(2, "2001:db8::1")}},
		{Family: allocator.IPv4, Default: true, Link: 4, Hops: []returnpath.Hop{hop(4, "0.0.0.0")}},
	}
	var many []returnpath.Hop
	for i := 20; i > 0; i-- {
		many = append(many, hop(5, fmt.Sprintf("203.0.113.%d", i)))
	}
	routes = append(routes, returnpath.Route{Family: allocator.IPv4, Default: true, Hops: append([]returnpath.Hop{hop(0, "")}, many...)})

	var first16 []netip.Addr
	for i := 1; i <= 16; i++ {
		first16 = append(first16, netip.MustParseAddr(fmt.Sprintf("203.0.113.%d", i)))
	}
	want := map[int][]netip.Addr{
		2: {netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1"), netip.MustParseAddr("2001:db8::2")},
		5: first16,
	}
	if got := defaultGateways(routes); !reflect.DeepEqual(got, want) {
		t.Errorf("defaultGateways:\n got %v\nwant %v", got, want)
	}
}
