package main

import (
	"net/netip"
	"strconv"

	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// services builds n Cluster-policy Services with 2 TCP ports and 5 endpoints each, from the
// documentation ranges only. IPv4 has 512 VIPs (192.0.2.0/24, 203.0.113.0/24) and 256 endpoint
// addresses (198.51.100.0/24), so VIPs are shared on distinct ports and endpoint addresses
// repeat on distinct ports. IPv6 addresses are all unique (2001:db8::/32).
func services(fam dataplane.Family, n int) []dataplane.Service {
	out := make([]dataplane.Service, n)
	for i := range out {
		s := dataplane.Service{Namespace: "bench", Name: "svc-" + strconv.Itoa(i)}
		var shift uint16 // keeps VIP:port and endpoint:port unique where addresses repeat
		if fam == dataplane.IPv4 {
			base := [2][3]byte{{192, 0, 2}, {203, 0, 113}}[(i/256)%2]
			s.VIPs = []netip.Addr{netip.AddrFrom4([4]byte{base[0], base[1], base[2], byte(i)})}
			shift = uint16(i / 512)
		} else {
			s.VIPs = []netip.Addr{v6(0x1, i)}
		}
		s.Ports = []dataplane.Port{
			{Name: "http", Protocol: dataplane.TCP, Port: 80 + 2*shift},
			{Name: "https", Protocol: dataplane.TCP, Port: 81 + 2*shift},
		}
		for j := range 5 {
			idx := i*5 + j
			ep := dataplane.Endpoint{Ports: []dataplane.EndpointPort{
				{Name: "http", Protocol: dataplane.TCP, Port: 8080},
				{Name: "https", Protocol: dataplane.TCP, Port: 8443},
			}}
			if fam == dataplane.IPv4 {
				ep.Addr = netip.AddrFrom4([4]byte{198, 51, 100, byte(idx)})
				ep.Ports[0].Port += uint16(2 * (idx / 256))
				ep.Ports[1].Port += uint16(2 * (idx / 256))
			} else {
				ep.Addr = v6(0x2, idx)
			}
			s.Endpoints = append(s.Endpoints, ep)
		}
		out[i] = s
	}
	return out
}

// v6 is 2001:db8:<group>::<i>.
func v6(group byte, i int) netip.Addr {
	return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 0, group, 12: byte(i >> 24), byte(i >> 16), byte(i >> 8), byte(i)})
}
