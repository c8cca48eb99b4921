package ingress

import (
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestRead(t *testing.T) {
	proxy, vip := corev1.LoadBalancerIPModeProxy, corev1.LoadBalancerIPModeVIP
	svc := &corev1.Service{Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{
		{IP: "192.0.2.1", IPMode: &proxy},
		{Hostname: "lb.example.com"},
		{IP: "::ffff:192.0.2.1", IPMode: &proxy},
		{IP: "fe80::1%eth0", IPMode: &proxy},
		{IP: "2001:db8::1", IPMode: &vip},
		{IP: "2001:db8::2"},
		{IP: "garbage", IPMode: ptr.To(proxy)},
	}}}}
	for _, tc := range []struct {
		desc string
		read func(*corev1.Service) []netip.Addr
		want []string
	}{
		{"Shown keeps zones and repeats", Shown, []string{"192.0.2.1", "192.0.2.1", "fe80::1%eth0", "2001:db8::1", "2001:db8::2"}},
		{"Addrs: each once, no zone", Addrs, []string{"192.0.2.1", "2001:db8::1", "2001:db8::2"}},
		{"ProxyAddrs: ipMode Proxy only", ProxyAddrs, []string{"192.0.2.1"}},
	} {
		var got []string
		for _, a := range tc.read(svc) {
			got = append(got, a.String())
		}
		if !slices.Equal(got, tc.want) {
			t.Errorf("%s: got %v, want %v", tc.desc, got, tc.want)
		}
	}
}

func TestJoin(t *testing.T) {
	if got := Join(nil); got != "" {
		t.Errorf("Join(nil) = %q", got)
	}
	if got := Join([]netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")}); got != "192.0.2.1, 2001:db8::1" {
		t.Errorf("Join = %q", got)
	}
}
