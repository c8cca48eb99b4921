package dataplane

import (
	"net/netip"
	"strconv"
	"testing"
)

// benchServices is n Cluster Services x 2 ports x 5 endpoints, as in bench/dataplane.
func benchServices(n int) []Service {
	svcs := make([]Service, 0, n)
	for i := range n {
		base := [2][3]byte{{192, 0, 2}, {203, 0, 113}}[(i/256)%2]
		shift := uint16(i / 512)
		s := Service{Namespace: "bench", Name: "svc-" + strconv.Itoa(i),
			VIPs:  []netip.Addr{netip.AddrFrom4([4]byte{base[0], base[1], base[2], byte(i)})},
			Ports: []Port{{Name: "http", Protocol: TCP, Port: 80 + 2*shift}, {Name: "https", Protocol: TCP, Port: 81 + 2*shift}}}
		for j := range 5 {
			idx := i*5 + j
			s.Endpoints = append(s.Endpoints, Endpoint{Addr: netip.AddrFrom4([4]byte{198, 51, 100, byte(idx)}),
				Ports: []EndpointPort{{Name: "http", Protocol: TCP, Port: 8080 + uint16(2*(idx/256))}, {Name: "https", Protocol: TCP, Port: 8443 + uint16(2*(idx/256))}}})
		}
		svcs = append(svcs, s)
	}
	return svcs
}

// Planning and spelling, without iptables: the CPU a Sync spends before iptables-restore.
func BenchmarkRenderFull10k(b *testing.B) {
	s := benchServices(10000)
	for b.Loop() {
		render(renderInput{Family: IPv4, Mark: 0x200000, RandomFully: true, Services: s})
	}
}

func BenchmarkPlanPartial10k(b *testing.B) {
	s := benchServices(10000)
	st := render(renderInput{Family: IPv4, Mark: 0x200000, RandomFully: true, Services: s}).State
	s[5000].Endpoints[0].Addr = s[5000].Endpoints[0].Addr.Next()
	for b.Loop() {
		makePlan(renderInput{Family: IPv4, Mark: 0x200000, RandomFully: true, Services: s, Last: st})
	}
}
