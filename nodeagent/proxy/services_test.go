package proxy

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

const ourClass = "paas.org/vip-allocator"

func lb(mode corev1.LoadBalancerIPMode, class *string, ips ...string) *corev1.Service {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, LoadBalancerClass: class}}
	for _, ip := range ips {
		svc.Status.LoadBalancer.Ingress = append(svc.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip, IPMode: ptr.To(mode)})
	}
	return svc
}

func TestCarried(t *testing.T) {
	other := "example.com/lb"
	adopted := map[netip.Addr]bool{netip.MustParseAddr("192.0.2.1"): true}
	for _, tc := range []struct {
		desc         string
		svc          *corev1.Service
		ownClassOnly bool
		awaiting     map[netip.Addr]bool
		want         []string
	}{
		{"Proxy VIP, no class", lb(corev1.LoadBalancerIPModeProxy, nil, "192.0.2.1"), false, nil, []string{"192.0.2.1"}},
		{"Proxy VIP, our class, own class only", lb(corev1.LoadBalancerIPModeProxy, ptr.To(ourClass), "192.0.2.1"), true, nil, []string{"192.0.2.1"}},
		{"no class while own class only", lb(corev1.LoadBalancerIPModeProxy, nil, "192.0.2.1"), true, nil, nil},
		{"another class", lb(corev1.LoadBalancerIPModeProxy, &other, "192.0.2.1"), false, nil, nil},
		{"ipMode VIP: kube-proxy's job (--ip-mode=VIP)", lb(corev1.LoadBalancerIPModeVIP, nil, "192.0.2.1"), false, nil, nil},
		{"ipMode VIP, awaiting the data path (adopted): carried beside kube-proxy", lb(corev1.LoadBalancerIPModeVIP, nil, "192.0.2.1"), false, adopted, []string{"192.0.2.1"}},
		{"awaiting, another address of it not", lb(corev1.LoadBalancerIPModeVIP, nil, "192.0.2.2", "192.0.2.1"), false, adopted, []string{"192.0.2.1"}},
		{"awaiting, another class: never ours", lb(corev1.LoadBalancerIPModeVIP, &other, "192.0.2.1"), false, adopted, nil},
		{"no IP yet", lb(corev1.LoadBalancerIPModeProxy, nil), false, nil, nil},
	} {
		var got []string
		for _, a := range Carried(tc.svc, tc.ownClassOnly, tc.awaiting) {
			got = append(got, a.String())
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("%s: Carried = %v, want %v", tc.desc, got, tc.want)
		}
	}
}

func TestDataplaneService(t *testing.T) {
	svc := lb(corev1.LoadBalancerIPModeProxy, nil, "192.0.2.1", "2001:db8::1")
	svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	svc.Spec.SessionAffinity = corev1.ServiceAffinityClientIP
	svc.Spec.LoadBalancerSourceRanges = []string{"203.0.113.7/24", "garbage"}
	svc.Spec.Ports = []corev1.ServicePort{{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80}, {Name: "dns", Protocol: corev1.ProtocolUDP, Port: 53}}
	slice := discoveryv1.EndpointSlice{
		Ports: []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}, {Name: ptr.To("dns"), Protocol: ptr.To(corev1.ProtocolUDP), Port: ptr.To[int32](5353)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"198.51.100.11"}, NodeName: ptr.To("node1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"198.51.100.12"}, NodeName: ptr.To("node2")}, // ready unset counts as ready
			{Addresses: []string{"198.51.100.13"}, NodeName: ptr.To("node1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}},
		},
	}
	got := dataplaneService(svc, Carried(svc, false, nil), []discoveryv1.EndpointSlice{slice}, "node1")
	ports := []dataplane.EndpointPort{{Name: "http", Protocol: "TCP", Port: 8080}, {Name: "dns", Protocol: "UDP", Port: 5353}}
	want := dataplane.Service{
		Namespace: "ns", Name: "web",
		VIPs:         []netip.Addr{netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("2001:db8::1")},
		Ports:        []dataplane.Port{{Name: "http", Protocol: "TCP", Port: 80}, {Name: "dns", Protocol: "UDP", Port: 53}},
		Local:        true,
		SourceRanges: []netip.Prefix{netip.MustParsePrefix("203.0.113.0/24")},
		Closed:       true,          // "garbage" closes it: dropped, the list would admit more than asked
		Affinity:     3 * time.Hour, // ClientIP without a config: kube-proxy's default
		Endpoints: []dataplane.Endpoint{
			{Addr: netip.MustParseAddr("198.51.100.11"), Local: true, Node: "node1", Ports: ports}, // its node: steering weighs it
			{Addr: netip.MustParseAddr("198.51.100.12"), Local: false, Node: "node2", Ports: ports},
		},
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("got  %+v\nwant %+v", got, want)
	}
}

func TestSteeringFor(t *testing.T) {
	ips := map[string][]netip.Addr{
		"node1": {netip.MustParseAddr("203.0.113.11"), netip.MustParseAddr("2001:db8::11")},
		"node2": {netip.MustParseAddr("2001:db8::12"), netip.MustParseAddr("203.0.113.12")},
		"node3": {netip.MustParseAddr("2001:db8::13")}, // single-stack IPv6: no IPv4 peer
	}
	v4 := steeringFor(dataplane.IPv4, "node1", ips)
	if v4.Node != "node1" || len(v4.Peers) != 2 || v4.Peers["node2"] != netip.MustParseAddr("203.0.113.12") {
		t.Errorf("IPv4 steering %+v", v4)
	}
	if v6 := steeringFor(dataplane.IPv6, "node1", ips); len(v6.Peers) != 3 || v6.Peers["node3"] != netip.MustParseAddr("2001:db8::13") {
		t.Errorf("IPv6 steering %+v", v6)
	}
}
