package returnplan

import (
	"net/netip"
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

var (
	v4, v6 = allocator.IPv4, allocator.IPv6
	pfx    = netip.MustParsePrefix
	addr   = netip.MustParseAddr
)

type gws = map[allocator.Family]netip.Addr

// internalNIC carries the node's InternalIP and its default routes of both families.
var internalNIC = Interface{Name: "eth0", Index: 2, Prefixes: []netip.Prefix{pfx("203.0.113.11/24"), pfx("2001:db8:a::11/64")},
	Gateways: gws{v4: addr("203.0.113.1"), v6: addr("2001:db8:a::1")}, Default: map[allocator.Family]bool{v4: true, v6: true}}

// externalNIC is on the VIPs' network, with no route of the main table by it.
var externalNIC = Interface{Name: "eth1", Index: 3, Prefixes: []netip.Prefix{pfx("192.0.2.11/24"), pfx("2001:db8:b::11/64")}}

func TestDecide(t *testing.T) {
	lan := Group{Name: "b", Prefixes: []netip.Prefix{pfx("192.0.2.0/24")}, Gateways: gws{v4: addr("192.0.2.1")}}
	lan6 := Group{Name: "b6", Prefixes: []netip.Prefix{pfx("2001:db8:b::/64")}, Gateways: gws{v6: addr("fe80::1")}}
	for _, tc := range []struct {
		desc   string
		ifaces []Interface
		groups []Group
		want   Plan
	}{{
		desc:   "one NIC: the default route's interface carries the group, nothing to add",
		ifaces: []Interface{{Name: "eth0", Index: 2, Prefixes: []netip.Prefix{pfx("192.0.2.11/24")}, Gateways: gws{v4: addr("192.0.2.254")}, Default: map[allocator.Family]bool{v4: true}}},
		groups: []Group{lan},
	}, {
		desc:   "no default route at all: nothing to add, nothing missing",
		ifaces: []Interface{{Name: "eth0", Index: 2, Prefixes: []netip.Prefix{pfx("192.0.2.11/24")}}},
		groups: []Group{lan},
	}, {
		desc:   "the group's network is not the default route's: a path via its gateway, mark and table of slot 1",
		ifaces: []Interface{internalNIC, externalNIC},
		groups: []Group{lan},
		want: Plan{Paths: []Path{{Interface: "eth1", Index: 3, Mark: 0x1000000, Table: 5301,
			Destinations: []netip.Prefix{pfx("192.0.2.0/24")}, Gateways: gws{v4: addr("192.0.2.1")}}}},
	}, {
		desc:   "both families on one interface share its mark and table; an IPv6 link-local gateway is on every link",
		ifaces: []Interface{externalNIC, internalNIC},
		groups: []Group{lan6, lan},
		want: Plan{Paths: []Path{{Interface: "eth1", Index: 3, Mark: 0x1000000, Table: 5301,
			Destinations: []netip.Prefix{pfx("192.0.2.0/24"), pfx("2001:db8:b::/64")}, Gateways: gws{v4: addr("192.0.2.1"), v6: addr("fe80::1")}}}},
	}, {
		desc:   "no gateway in the group: the one the interface's routes name",
		ifaces: []Interface{internalNIC, withGateway(externalNIC, v4, "192.0.2.254")},
		groups: []Group{{Name: "b", Prefixes: []netip.Prefix{pfx("192.0.2.0/24")}}},
		want: Plan{Paths: []Path{{Interface: "eth1", Index: 3, Mark: 0x1000000, Table: 5301,
			Destinations: []netip.Prefix{pfx("192.0.2.0/24")}, Gateways: gws{v4: addr("192.0.2.254")}}}},
	}, {
		desc:   "a group gateway off the interface's subnets is not used",
		ifaces: []Interface{internalNIC, externalNIC},
		groups: []Group{{Name: "b", Prefixes: []netip.Prefix{pfx("192.0.2.0/24")}, Gateways: gws{v4: addr("198.51.100.1")}}},
		want:   Plan{Missing: []Missing{{Group: "b", Interface: "eth1", Family: v4}}},
	}, {
		desc:   "no gateway at all: no path, and the group is reported",
		ifaces: []Interface{internalNIC, externalNIC},
		groups: []Group{{Name: "b", Prefixes: []netip.Prefix{pfx("192.0.2.0/24")}}, lan6},
		want: Plan{Paths: []Path{{Interface: "eth1", Index: 3, Mark: 0x1000000, Table: 5301,
			Destinations: []netip.Prefix{pfx("2001:db8:b::/64")}, Gateways: gws{v6: addr("fe80::1")}}},
			Missing: []Missing{{Group: "b", Interface: "eth1", Family: v4}}},
	}, {
		desc: "announce.interfaces names the interface of a segment on no subnet (routed to the nodes); the first group's gateway wins",
		ifaces: []Interface{internalNIC, externalNIC,
			{Name: "eth2", Index: 4, Prefixes: []netip.Prefix{pfx("198.51.100.11/25")}}},
		groups: []Group{
			{Name: "routed", Prefixes: []netip.Prefix{pfx("198.51.100.128/25")}, Interfaces: []string{"eth2"}, Gateways: gws{v4: addr("198.51.100.1")}},
			{Name: "z", Prefixes: []netip.Prefix{pfx("198.51.100.200/29")}, Interfaces: []string{"eth2"}, Gateways: gws{v4: addr("198.51.100.2")}},
			lan},
		want: Plan{Paths: []Path{
			{Interface: "eth1", Index: 3, Mark: 0x1000000, Table: 5301, Destinations: []netip.Prefix{pfx("192.0.2.0/24")}, Gateways: gws{v4: addr("192.0.2.1")}},
			{Interface: "eth2", Index: 4, Mark: 0x2000000, Table: 5302, Destinations: []netip.Prefix{pfx("198.51.100.128/25"), pfx("198.51.100.200/29")}, Gateways: gws{v4: addr("198.51.100.1")}},
		}},
	}, {
		desc:   "a BGP group: its peer on an interface's subnet carries it there and is the router back",
		ifaces: []Interface{internalNIC, externalNIC},
		groups: []Group{{Name: "bgp", Prefixes: []netip.Prefix{pfx("198.51.100.0/24")}, Peers: []netip.Addr{addr("203.0.113.254"), addr("192.0.2.254")}}},
		want: Plan{Paths: []Path{{Interface: "eth1", Index: 3, Mark: 0x1000000, Table: 5301,
			Destinations: []netip.Prefix{pfx("198.51.100.0/24")}, Gateways: gws{v4: addr("192.0.2.254")}}}},
	}, {
		desc:   "a BGP group's own gateway wins over its peer",
		ifaces: []Interface{internalNIC, externalNIC},
		groups: []Group{{Name: "bgp", Prefixes: []netip.Prefix{pfx("198.51.100.0/24")}, Peers: []netip.Addr{addr("192.0.2.254")}, Gateways: gws{v4: addr("192.0.2.1")}}},
		want: Plan{Paths: []Path{{Interface: "eth1", Index: 3, Mark: 0x1000000, Table: 5301,
			Destinations: []netip.Prefix{pfx("198.51.100.0/24")}, Gateways: gws{v4: addr("192.0.2.1")}}}},
	}} {
		t.Run(tc.desc, func(t *testing.T) {
			got := Decide(tc.ifaces, tc.groups)
			if !reflect.DeepEqual(got, tc.want) {
				t.Fatalf("Decide:\n got %+v\nwant %+v", got, tc.want)
			}
		})
	}
}

func TestDecideBeyondMaxPaths(t *testing.T) {
	ifaces := []Interface{internalNIC}
	var groups []Group
	for i := range MaxPaths + 1 {
		p := netip.PrefixFrom(netip.AddrFrom4([4]byte{10, byte(i), 0, 11}), 24)
		ifaces = append(ifaces, Interface{Name: "eth" + string(rune('a'+i)), Index: 10 + i, Prefixes: []netip.Prefix{p}, Gateways: gws{v4: p.Masked().Addr().Next()}})
		groups = append(groups, Group{Name: "g" + string(rune('a'+i)), Prefixes: []netip.Prefix{p.Masked()}})
	}
	got := Decide(ifaces, groups)
	if len(got.Paths) != MaxPaths || got.Paths[len(got.Paths)-1].Mark != MarkMask || got.Paths[MaxPaths-1].Table != TableBase+MaxPaths {
		t.Fatalf("%d paths, the last %+v: want %d, the last with mark %#x", len(got.Paths), got.Paths[len(got.Paths)-1], MaxPaths, MarkMask)
	}
	if want := []Missing{{Group: "gp", Interface: "ethp", Family: v4}}; !reflect.DeepEqual(got.Missing, want) {
		t.Fatalf("missing %+v, want %+v", got.Missing, want)
	}
}

func withGateway(ifi Interface, fam allocator.Family, gw string) Interface {
	ifi.Gateways = gws{fam: addr(gw)}
	return ifi
}

func TestGroupOf(t *testing.T) {
	peers := []paasv1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "192.0.2.254"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "a"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "203.0.113.254"}},
	}
	g := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp"}, Spec: paasv1.IPGroupSpec{Segment: "198.51.100.0/24",
		Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP, BGP: &paasv1.BGPAnnounce{Peers: []string{"b"}},
			Gateway: &paasv1.Gateway{IPv6: "fe80::1"}}}}
	want := Group{Name: "bgp", Prefixes: []netip.Prefix{pfx("198.51.100.0/24")}, Gateways: gws{v6: addr("fe80::1")}, Peers: []netip.Addr{addr("192.0.2.254")}}
	if got, ok := GroupOf(g, peers); !ok || !reflect.DeepEqual(got, want) {
		t.Fatalf("GroupOf: %+v, %v; want %+v", got, ok, want)
	}
	g.Spec.Announce.Mode = paasv1.AnnounceL2 // peers only count for BGP
	want.Peers = nil
	if got, _ := GroupOf(g, peers); !reflect.DeepEqual(got, want) {
		t.Fatalf("GroupOf of an L2 group: %+v; want %+v", got, want)
	}
}

func TestPublished(t *testing.T) {
	got := Published([]paasv1.NodeInterface{{Name: "eth0", Addrs: []netip.Prefix{pfx("203.0.113.11/24")},
		Routers: []netip.Addr{addr("203.0.113.1"), addr("2001:db8:a::1")}, Default: []string{"IPv4"}}})
	want := []Interface{{Name: "eth0", Prefixes: []netip.Prefix{pfx("203.0.113.11/24")},
		Gateways: gws{v4: addr("203.0.113.1"), v6: addr("2001:db8:a::1")}, Default: map[allocator.Family]bool{v4: true}}}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Published: %+v; want %+v", got, want)
	}
}
