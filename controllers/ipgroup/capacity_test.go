package ipgroup

import (
	"net/netip"
	"testing"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

func TestSetCapacityLeavesReservedOut(t *testing.T) {
	g, err := allocator.NewGroup(allocator.Group{Name: "lan", Segment: netip.MustParsePrefix("192.0.2.0/28"), L2: true})
	if err != nil {
		t.Fatal(err)
	}
	rs := []allocator.Reservation{
		{Prefix: netip.MustParsePrefix("192.0.2.1/32")},                // a node
		{Prefix: netip.MustParsePrefix("192.0.2.4/31")},                // a pod CIDR, one address held (a conflict)
		{Prefix: netip.MustParsePrefix("192.0.2.15/32"), L2Only: true}, // a subnet's broadcast
	}
	held := []netip.Addr{netip.MustParseAddr("192.0.2.5"), netip.MustParseAddr("192.0.2.9"), netip.MustParseAddr("198.51.100.1")}
	var st paasv1.IPGroupStatus
	setCapacity(&st, g, ledgerCounts{held: held}, rs)
	if st.Capacity != "16" || st.Allocated != 2 || st.Reserved != "4" || st.Available != "11" {
		t.Fatalf("capacity %s allocated %d reserved %s available %s, want 16 2 4 11", st.Capacity, st.Allocated, st.Reserved, st.Available)
	}
	// Records of hosts on the LAN using an address: neither allocated nor
	// available; one on a reserved address is counted there once.
	setCapacity(&st, g, ledgerCounts{held: held, records: []netip.Addr{netip.MustParseAddr("192.0.2.10"), netip.MustParseAddr("192.0.2.1")}, inUseOnLAN: 2}, rs)
	if st.Allocated != 2 || st.Reserved != "4" || st.Available != "10" || st.InUseOnLAN != 2 {
		t.Fatalf("allocated %d reserved %s available %s in use on the LAN %d, want 2 4 10 2", st.Allocated, st.Reserved, st.Available, st.InUseOnLAN)
	}
}
