package allocator

import (
	"errors"
	"strings"
	"testing"
)

func TestReservedAddressesAreNeverHandedOut(t *testing.T) {
	lan := Group{Name: "lan", Segment: pfx("192.0.2.0/24"), Excluded: pfxs("192.0.2.0", "192.0.2.255"), AutoAssign: true, L2: true}
	routed := Group{Name: "routed", Segment: pfx("198.51.100.0/24"), AutoAssign: false}
	ten := Group{Name: "ten", Segment: pfx("10.0.0.0/8"), AutoAssign: false}
	node1 := Reservation{Prefix: pfx("192.0.2.1"), Holder: "the address of Node node1", Kind: "Node"}
	cluster := []Reservation{
		node1,
		{Prefix: pfx("192.0.2.2/31"), Holder: "in the pod CIDR 192.0.2.2/31 of Node node2", Kind: "PodCIDR"},
		{Prefix: pfx("::ffff:10.0.0.0/108"), Holder: "in the Service CIDR 10.0.0.0/12 (ServiceCIDR kubernetes)", Kind: "ServiceCIDR"},
		{Prefix: pfx("198.51.100.0"), Holder: "the network address of subnet 198.51.100.0/24 (Node node1 eth1)", Kind: "Subnet", L2Only: true},
		{Prefix: pfx("198.51.100.255"), Holder: "the broadcast address of subnet 198.51.100.0/24 (Node node1 eth1)", Kind: "Subnet", L2Only: true},
	}
	runSteps(t, []step{
		{desc: "before reservations the node's address would be first", groups: []Group{lan, routed, ten}, key: "probe", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
		{desc: "probe leaves", key: "probe", release: true},
		{desc: "automatic allocation skips the node address and the pod CIDR", reserve: cluster, key: "a", req: Request{Families: v4}, want: []string{"192.0.2.4"}},
		{desc: "a request for the node's address is refused", key: "b", req: Request{Families: v4, IPs: addrs("192.0.2.1")}, wantErr: ErrReserved},
		{desc: "a request inside the pod CIDR is refused", key: "b", req: Request{Families: v4, IPs: addrs("192.0.2.3")}, wantErr: ErrReserved},
		{desc: "a request inside the Service CIDR is refused", key: "b", req: Request{Families: v4, IPs: addrs("10.0.0.1")}, wantErr: ErrReserved},
		{desc: "a named /8 group jumps over the whole Service CIDR in one step", key: "c", req: Request{Families: v4, Groups: []string{"ten"}}, want: []string{"10.16.0.0"}},
		{desc: "a subnet's network address is free in a routed group", key: "d", req: Request{Families: v4, IPs: addrs("198.51.100.0")}, want: []string{"198.51.100.0"}},
		{desc: "and so is its broadcast address", key: "e", req: Request{Families: v4, IPs: addrs("198.51.100.255")}, want: []string{"198.51.100.255"}},
		{desc: "the routed group turns L2: its subnet's edges become reserved for new requests", groups: []Group{lan, {Name: "routed", Segment: pfx("198.51.100.0/24"), L2: true}, ten}, key: "f", req: Request{Families: v4, IPs: addrs("198.51.100.255")}, wantErr: ErrReserved},
		{desc: "a key that holds a reserved address keeps it", key: "e", req: Request{Families: v4, IPs: addrs("198.51.100.255")}, want: []string{"198.51.100.255"}},
		{desc: "a node takes the address a Service holds: the Service keeps it", reserve: append(cluster, Reservation{Prefix: pfx("192.0.2.4"), Holder: "the address of Node node3"}), key: "a", req: Request{Families: v4}, want: []string{"192.0.2.4"}},
		{desc: "and the next Service skips it", key: "g", req: Request{Families: v4}, want: []string{"192.0.2.5"}},
		{desc: "excluding the conflicted address moves its holder to a free, unreserved one", groups: []Group{{Name: "lan", Segment: pfx("192.0.2.0/24"), Excluded: pfxs("192.0.2.0", "192.0.2.4", "192.0.2.255"), AutoAssign: true, L2: true}, routed, ten}, key: "a", req: Request{Families: v4}, want: []string{"192.0.2.6"}},
		{desc: "reservations lifted: the lowest address is found again", reserve: []Reservation{}, key: "h", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
	})
}

func TestReservedRequestNamesItsHolder(t *testing.T) {
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "lan", Segment: pfx("192.0.2.0/24"), AutoAssign: true, L2: true})})
	a.SetReserved([]Reservation{
		{Prefix: pfx("192.0.2.0/24"), Holder: "in the pod CIDR 192.0.2.0/24 of Node node9"},
		{Prefix: pfx("192.0.2.251"), Holder: "the address of Node node1"},
	})
	_, err := a.Allocate("ns/svc", Request{Families: v4, IPs: addrs("192.0.2.251")})
	want := "requested 192.0.2.251 is the address of Node node1, reserved in the cluster and never handed out; request another address"
	if !errors.Is(err, ErrReserved) || err.Error() != want {
		t.Fatalf("error %q, want %q (the most specific holder)", err, want)
	}
	if r, ok := a.Reserved(addrs("192.0.2.7")[0]); !ok || !strings.Contains(r.Holder, "pod CIDR") {
		t.Fatalf("Reserved(192.0.2.7) = %v %v, want the pod CIDR", r, ok)
	}
	_, err = a.Allocate("ns/auto", Request{Families: v4})
	if want := "no free IPv4 address in IPGroup lan (0 of 256 in use, 256 reserved in the cluster)"; !errors.Is(err, ErrGroupFull) || !strings.HasPrefix(err.Error(), want) {
		t.Fatalf("a group wholly reserved: %v, want ErrGroupFull starting %q", err, want)
	}
}

func TestReservedCount(t *testing.T) {
	rs := []Reservation{
		{Prefix: pfx("192.0.2.0/28")},                    // 16, of which .0 is excluded
		{Prefix: pfx("192.0.2.8/29")},                    // inside the one above
		{Prefix: pfx("192.0.2.200")},                     // 1
		{Prefix: pfx("192.0.2.255"), L2Only: true},       // excluded anyway
		{Prefix: pfx("192.0.2.128"), L2Only: true},       // 1 for L2 groups
		{Prefix: pfx("10.0.0.0/8")},                      // outside
		{Prefix: pfx("2001:db8::/120")},                  // 256 minus the anycast 2001:db8::
		{Prefix: pfx("2001:db8:0:1::/64"), L2Only: true}, // a whole /64 for L2 groups, minus its anycast
	}
	for _, tc := range []struct {
		group Group
		want  string
	}{
		{Group{Name: "routed", Segment: pfx("192.0.2.0/24"), Excluded: pfxs("192.0.2.0", "192.0.2.255")}, "16"},
		{Group{Name: "l2", Segment: pfx("192.0.2.0/24"), Excluded: pfxs("192.0.2.0", "192.0.2.255"), L2: true}, "17"},
		{Group{Name: "v6", Segment: pfx("2001:db8::/48"), L2: true}, "18446744073709551870"}, // 255 + 2^64-1
		{Group{Name: "elsewhere", Segment: pfx("203.0.113.0/24")}, "0"},
	} {
		a := New()
		g := mustGroup(t, tc.group)
		a.SetGroups([]*Group{g})
		a.SetReserved(rs)
		if got := a.ReservedCount(g).String(); got != tc.want {
			t.Errorf("%s: ReservedCount = %s, want %s", tc.group.Name, got, tc.want)
		}
	}
}
