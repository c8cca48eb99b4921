package v1

import (
	"net/netip"
	"testing"

	"k8s.io/utils/ptr"
)

// The covering route of an aggregating group lies inside the part of the
// group that holds the VIP, whatever length announce.bgp asks.
func TestCoveringBits(t *testing.T) {
	for _, tc := range []struct {
		name      string
		segment   string
		addresses []string
		v4, v6    *int32
		vip       string
		want      int
	}{
		{"a /28 of a /25 segment", "203.0.113.128/25", nil, ptr.To[int32](28), nil, "203.0.113.130", 28},
		{"no aggregation: the host route", "203.0.113.128/25", nil, nil, nil, "203.0.113.130", 0},
		{"addresses only: a /8 asked, the entry's /28 given", "", []string{"203.0.113.0/28"}, ptr.To[int32](8), nil, "203.0.113.5", 28},
		{"IPv6 beside an IPv4 segment: the IPv6 entry bounds it", "203.0.113.0/24", []string{"2001:db8::100/120"}, ptr.To[int32](24), ptr.To[int32](16), "2001:db8::105", 120},
		{"a range: the widest aligned block inside it", "", []string{"203.0.113.10-203.0.113.20"}, ptr.To[int32](24), nil, "203.0.113.17", 30},
		{"a range: at its edge only a host route fits", "", []string{"203.0.113.10-203.0.113.20"}, ptr.To[int32](24), nil, "203.0.113.10", 31},
		{"a range of one address: the host route", "", []string{"203.0.113.9-203.0.113.9"}, ptr.To[int32](24), nil, "203.0.113.9", 0},
		{"a VIP in no part: the host route", "203.0.113.128/25", nil, ptr.To[int32](24), nil, "198.51.100.1", 0},
		{"the other family's length does not apply", "203.0.113.0/24", []string{"2001:db8::/64"}, ptr.To[int32](24), nil, "2001:db8::5", 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := IPGroupSpec{Segment: tc.segment, Addresses: tc.addresses, Announce: &Announce{Mode: AnnounceBGP,
				BGP: &BGPAnnounce{AggregationLength: tc.v4, AggregationLengthV6: tc.v6}}}
			got := s.CoveringBits(netip.MustParseAddr(tc.vip))
			if got != tc.want {
				t.Fatalf("CoveringBits = %d, want %d", got, tc.want)
			}
			if got == 0 {
				return
			}
			route := netip.PrefixFrom(netip.MustParseAddr(tc.vip), got).Masked()
			inside := false
			for _, e := range append([]string{tc.segment}, tc.addresses...) {
				if first, last, ok := partRange(e); ok && !route.Addr().Less(first) && !last.Less(lastOf(route)) {
					inside = true
				}
			}
			if !inside {
				t.Errorf("route %s is not inside a part of the group", route)
			}
		})
	}
}
