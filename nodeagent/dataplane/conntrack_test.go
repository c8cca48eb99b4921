//go:build root

package dataplane

import (
	"fmt"
	"net"
	"slices"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
)

func TestStaleFlows(t *testing.T) {
	dns := func(eps ...Endpoint) *Service {
		return &Service{Namespace: "kube-system", Name: "dns", VIPs: addrs("192.0.2.53", "2001:db8::53"),
			Ports:     []Port{{Name: "dns", Protocol: UDP, Port: 53}, {Name: "dns-tcp", Protocol: TCP, Port: 53}},
			Endpoints: eps}
	}
	a := ep("198.51.100.1", false, "dns/UDP/5353", "dns-tcp/5353")
	b := ep("198.51.100.2", true, "dns/UDP/5353", "dns-tcp/5353")
	a6 := ep("2001:db8:1::1", false, "dns/UDP/5353")
	local := func(s *Service) *Service { s.Local = true; return s }
	otherVIP := dns(a, b)
	otherVIP.VIPs = addrs("192.0.2.54")
	for _, tc := range []struct {
		desc          string
		before, after *Service
		want          []string
	}{
		{"new Service", nil, dns(a), nil},
		{"unchanged", dns(a, b), dns(a, b), nil},
		{"an endpoint added", dns(a), dns(a, b), nil},
		{"an endpoint gone: its UDP flows, not its TCP ones", dns(a, b), dns(b), []string{"UDP 192.0.2.53:53 via 198.51.100.1"}},
		{"every endpoint gone, both families", dns(a, a6), dns(), []string{"UDP 192.0.2.53:53 via 198.51.100.1", "UDP [2001:db8::53]:53 via 2001:db8:1::1"}},
		{"the Service gone", dns(b), nil, []string{"UDP 192.0.2.53:53 via 198.51.100.2"}},
		{"its VIP changed", dns(a), otherVIP, []string{"UDP 192.0.2.53:53 via 198.51.100.1"}},
		{"Local: a remote endpoint is no target", local(dns(a, b)), local(dns(b)), nil},
		{"Local: the local endpoint gone", local(dns(a, b)), local(dns(a)), []string{"UDP 192.0.2.53:53 via 198.51.100.2"}},
	} {
		var got []string
		for _, f := range StaleFlows(tc.before, tc.after) {
			got = append(got, fmt.Sprintf("%s %s via %s", f.Protocol, net.JoinHostPort(f.VIP.String(), fmt.Sprint(f.Port)), f.Endpoint))
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: stale flows %q, want %q", tc.desc, got, tc.want)
		}
	}
}

// TestUDPFlowFollowsEndpoint: a UDP client sending from one port keeps its
// conntrack entry, and so its endpoint, while it sends; once the rules no
// longer send to that endpoint, ForgetFlows moves it to the one they do.
func TestUDPFlowFollowsEndpoint(t *testing.T) {
	for _, plane := range []string{PlaneNFTables, "nft"} {
		t.Run(plane, func(t *testing.T) {
			enterNetns(t)
			testUDPFlowFollowsEndpoint(t, plane)
		})
	}
}

func testUDPFlowFollowsEndpoint(t *testing.T, plane string) {
	netnstest.Veth(t, "vipa0", "", "vipa1")
	for _, a := range []string{"198.51.100.1/32", "198.51.100.2/32", "198.51.100.3/32"} {
		cmd(t, "ip", "addr", "add", a, "dev", "vipa0")
	}
	cmd(t, "ip", "route", "add", "192.0.2.0/24", "dev", "vipa0", "src", "198.51.100.1")
	for _, name := range []string{"198.51.100.2", "198.51.100.3"} {
		pc, err := net.ListenPacket("udp", name+":5353")
		if err != nil {
			t.Fatal(err)
		}
		defer pc.Close()
		go func() {
			buf := make([]byte, 64)
			for {
				_, from, err := pc.ReadFrom(buf)
				if err != nil {
					return
				}
				pc.WriteTo([]byte(name), from)
			}
		}()
	}
	d := openPlane(t, plane, IPv4)
	dns := func(endpoint string) Service {
		return Service{Namespace: "kube-system", Name: "dns", VIPs: addrs("192.0.2.53"),
			Ports: []Port{{Name: "dns", Protocol: UDP, Port: 53}}, Endpoints: []Endpoint{ep(endpoint, false, "dns/UDP/5353")}}
	}
	first, second := dns("198.51.100.2"), dns("198.51.100.3")
	if _, err := d.Sync([]Service{first}, true); err != nil {
		t.Fatal(err)
	}
	client, err := net.ListenUDP("udp", &net.UDPAddr{IP: net.ParseIP("198.51.100.1"), Port: 54321})
	if err != nil {
		t.Fatal(err)
	}
	defer client.Close()
	ask := func() string {
		t.Helper()
		if _, err := client.WriteTo([]byte("who"), &net.UDPAddr{IP: net.ParseIP("192.0.2.53"), Port: 53}); err != nil {
			t.Fatal(err)
		}
		client.SetReadDeadline(time.Now().Add(2 * time.Second))
		buf := make([]byte, 64)
		n, _, err := client.ReadFrom(buf)
		if err != nil {
			return "no answer: " + err.Error()
		}
		return string(buf[:n])
	}
	if got := ask(); got != "198.51.100.2" {
		t.Fatalf("first answer from %q, want 198.51.100.2", got)
	}
	if _, err := d.Sync([]Service{second}, false); err != nil {
		t.Fatal(err)
	}
	if got := ask(); got != "198.51.100.2" {
		t.Fatalf("before its flows are forgotten the client still reaches the old endpoint (its conntrack entry), got %q", got)
	}
	if err := ForgetFlows(StaleFlows(&first, &second)); err != nil {
		t.Fatal(err)
	}
	if got := ask(); got != "198.51.100.3" {
		t.Fatalf("after the stale flows are forgotten the client reaches %q, want 198.51.100.3", got)
	}
}
