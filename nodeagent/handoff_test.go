package nodeagent

import (
	"maps"
	"net/netip"
	"testing"

	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

func TestHandoffTargets(t *testing.T) {
	a := netip.MustParseAddr
	node := func(name string, prefixes ...string) election.Node {
		n := election.Node{Name: name}
		for _, p := range prefixes {
			n.Interfaces = append(n.Interfaces, election.Interface{Name: "eth0", Prefix: netip.MustParsePrefix(p)})
		}
		return n
	}
	vip4, vip6 := a("192.0.2.100"), a("2001:db8::100")
	alive := []election.Node{
		node("node1", "198.51.100.11/24", "192.0.2.11/24", "2001:db8::11/64"),
		node("node2", "192.0.2.12/24"),
		node("elsewhere", "203.0.113.13/24"),
	}
	for _, tc := range []struct {
		name  string
		owned map[netip.Addr]string
		from  map[netip.Addr]string
		want  dataplane.Handoffs
	}{
		{"to the previous owner's address on the VIP's subnet, per family",
			map[netip.Addr]string{vip4: "eth0", vip6: "eth0"},
			map[netip.Addr]string{vip4: "node1", vip6: "node1"},
			dataplane.Handoffs{vip4: a("192.0.2.11"), vip6: a("2001:db8::11")}},
		{"a VIP no longer answered for: none",
			map[netip.Addr]string{},
			map[netip.Addr]string{vip4: "node1"},
			dataplane.Handoffs{}},
		{"the previous owner is dead: none",
			map[netip.Addr]string{vip4: "eth0"},
			map[netip.Addr]string{vip4: "node9"},
			dataplane.Handoffs{}},
		{"the previous owner has no address on the subnet: none",
			map[netip.Addr]string{vip4: "eth0"},
			map[netip.Addr]string{vip4: "elsewhere"},
			dataplane.Handoffs{}},
		{"taken over from nobody: none",
			map[netip.Addr]string{vip4: "eth0"},
			map[netip.Addr]string{},
			dataplane.Handoffs{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := handoffTargets(tc.owned, tc.from, alive); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}
