package returnpath

import (
	"net/netip"
	"reflect"
	"testing"

	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

func TestMarks(t *testing.T) {
	plan := returnplan.Plan{Paths: []returnplan.Path{{Interface: "eth1", Index: 3, Mark: 0x1000000, Table: 5301,
		Destinations: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}, Gateways: map[allocator.Family]netip.Addr{allocator.IPv4: netip.MustParseAddr("192.0.2.1")}}}}
	want := []dataplane.ReturnMark{{Interface: "eth1", Mark: 0x1000000, Mask: 0xf000000, Destinations: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}}}
	if got := Marks(plan); !reflect.DeepEqual(got, want) {
		t.Fatalf("Marks: got %+v, want %+v", got, want)
	}
	if got := Marks(returnplan.Plan{}); got != nil {
		t.Fatalf("no paths, marks %+v: want none, so a one-NIC node's rules stay as they were", got)
	}
}
