package service

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestIPModeFor(t *testing.T) {
	proxy, vip := corev1.LoadBalancerIPModeProxy, corev1.LoadBalancerIPModeVIP
	for _, tc := range []struct {
		desc       string
		configured corev1.LoadBalancerIPMode
		a          announcement
		shown      corev1.LoadBalancerIPMode
		isShown    bool
		want       corev1.LoadBalancerIPMode
	}{
		{"allocated here: Proxy", proxy, announcement{found: true, proxyReady: true}, "", false, proxy},
		{"allocated here, ledger object not in the cache yet: Proxy", proxy, announcement{}, "", false, proxy},
		{"adopted, the owner has not reported: VIP stays", proxy, announcement{found: true}, vip, true, vip},
		{"adopted, the owner reported: Proxy", proxy, announcement{found: true, proxyReady: true}, vip, true, proxy},
		{"just adopted, ledger object not in the cache yet: VIP stays", proxy, announcement{}, vip, true, vip},
		{"shown as Proxy already, object not in the cache: Proxy", proxy, announcement{}, proxy, true, proxy},
		{"handed over, then the owner changed (its report not in yet): Proxy stays", proxy, announcement{found: true}, proxy, true, proxy},
		{"--ip-mode=VIP: VIP whatever the ledger says", vip, announcement{found: true, proxyReady: true}, vip, true, vip},
	} {
		if got := ipModeFor(tc.configured, tc.a, tc.shown, tc.isShown); got != tc.want {
			t.Errorf("%s: ipModeFor = %s, want %s", tc.desc, got, tc.want)
		}
	}
}

func TestAwaitsDataPath(t *testing.T) {
	addr := netip.MustParseAddr("192.0.2.192")
	proxy, vip := corev1.LoadBalancerIPModeProxy, corev1.LoadBalancerIPModeVIP
	svc := func(mode *corev1.LoadBalancerIPMode) *corev1.Service {
		s := &corev1.Service{}
		s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr.String(), IPMode: mode}}
		return s
	}
	for _, tc := range []struct {
		desc       string
		configured corev1.LoadBalancerIPMode
		svc        *corev1.Service
		want       bool
	}{
		{"MetalLB wrote no ipMode (kube-proxy reads VIP)", proxy, svc(nil), true},
		{"ipMode VIP", proxy, svc(&vip), true},
		{"ipMode Proxy already: no kube-proxy rule to replace", proxy, svc(&proxy), false},
		{"not in the status", proxy, &corev1.Service{}, false},
		{"--ip-mode=VIP: kube-proxy keeps it", vip, svc(nil), false},
	} {
		if got := awaitsDataPath(tc.configured, tc.svc, addr); got != tc.want {
			t.Errorf("%s: awaitsDataPath = %v, want %v", tc.desc, got, tc.want)
		}
	}
}
