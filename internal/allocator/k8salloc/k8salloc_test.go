package k8salloc

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

func TestRequestFor(t *testing.T) {
	v4 := []corev1.IPFamily{corev1.IPv4Protocol}
	dual := []corev1.IPFamily{corev1.IPv6Protocol, corev1.IPv4Protocol}
	for _, tc := range []struct {
		desc        string
		annotations map[string]string
		lbIP        string
		families    []corev1.IPFamily
		wantIPs     []string
		wantGroups  []string
		wantFams    []allocator.Family
		wantErr     string
	}{
		{desc: "nothing requested", families: v4, wantFams: []allocator.Family{allocator.IPv4}},
		{desc: "no families yet defaults to IPv4", wantFams: []allocator.Family{allocator.IPv4}},
		{desc: "spec.loadBalancerIP", lbIP: "192.0.2.5", families: v4, wantIPs: []string{"192.0.2.5"}, wantFams: []allocator.Family{allocator.IPv4}},
		{desc: "annotation, one per family, spaces tolerated", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.5, 2001:db8::5"}, families: dual,
			wantIPs: []string{"192.0.2.5", "2001:db8::5"}, wantFams: []allocator.Family{allocator.IPv6, allocator.IPv4}},
		{desc: "annotation and spec agree", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.5"}, lbIP: "192.0.2.5", families: v4, wantIPs: []string{"192.0.2.5"}, wantFams: []allocator.Family{allocator.IPv4}},
		{desc: "annotation and spec disagree", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.5"}, lbIP: "192.0.2.6", families: v4, wantErr: "disagree; set only one"},
		{desc: "two of one family", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.5,192.0.2.6"}, families: v4, wantErr: "two IPv4 addresses"},
		{desc: "garbage", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.x"}, families: v4, wantErr: `"192.0.2.x" is not an IP address`},
		{desc: "garbage in spec", lbIP: "nope", families: v4, wantErr: `spec.loadBalancerIP "nope" is not an IP address`},
		// Hostile annotations: each a clear message, never a crash, never a guess.
		{desc: "IPv4-mapped IPv6 is refused, with the IPv4 spelling", annotations: map[string]string{paasv1.IPsAnnotation: "::ffff:192.0.2.11"}, families: v4, wantErr: `"::ffff:192.0.2.11" is an IPv4 address written as IPv4-mapped IPv6; write it as 192.0.2.11`},
		{desc: "IPv4-mapped next to the same IPv4: not two families", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.11,::ffff:192.0.2.12"}, families: dual, wantErr: "IPv4-mapped IPv6"},
		{desc: "leading zeros", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.010"}, families: v4, wantErr: `"192.0.2.010" is not an IP address: leading zeros are ambiguous`},
		{desc: "a zone", annotations: map[string]string{paasv1.IPsAnnotation: "fe80::1%eth0"}, families: v4, wantErr: `"fe80::1%eth0" has a zone (%eth0)`},
		{desc: "spaces inside an entry", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.5 192.0.2.6"}, families: v4, wantErr: `"192.0.2.5 192.0.2.6" is not an IP address`},
		{desc: "spaces, tabs and newlines around entries", annotations: map[string]string{paasv1.IPsAnnotation: " \t192.0.2.5 ,\n"}, families: v4, wantIPs: []string{"192.0.2.5"}, wantFams: []allocator.Family{allocator.IPv4}},
		{desc: "the same address twice", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.5, 192.0.2.5"}, families: v4, wantErr: "names 192.0.2.5 twice"},
		{desc: "500 entries", annotations: map[string]string{paasv1.IPsAnnotation: many(500)}, families: v4, wantErr: "lists 500 addresses; a Service gets one address per family, so two at most"},
		{desc: "one huge entry is quoted clipped", annotations: map[string]string{paasv1.IPsAnnotation: strings.Repeat("9", 100000)}, families: v4, wantErr: `"` + strings.Repeat("9", 64) + `..." is not an IP address`},
		{desc: "only commas: nothing asked", annotations: map[string]string{paasv1.IPsAnnotation: " , ,"}, families: v4, wantFams: []allocator.Family{allocator.IPv4}},
		{desc: "a zone in spec.loadBalancerIP", lbIP: "fe80::1%eth0", families: v4, wantErr: "spec.loadBalancerIP \"fe80::1%eth0\" has a zone"},
		{desc: "named groups", annotations: map[string]string{paasv1.IPGroupAnnotation: "a, b"}, families: v4, wantGroups: []string{"a", "b"}, wantFams: []allocator.Family{allocator.IPv4}},
		// MetalLB's annotations, honoured as ours.
		{desc: "metallb.io/loadBalancerIPs", annotations: map[string]string{"metallb.io/loadBalancerIPs": "192.0.2.5,2001:db8::5"}, families: dual,
			wantIPs: []string{"192.0.2.5", "2001:db8::5"}, wantFams: []allocator.Family{allocator.IPv6, allocator.IPv4}},
		{desc: "metallb.universe.tf/loadBalancerIPs", annotations: map[string]string{"metallb.universe.tf/loadBalancerIPs": "192.0.2.5"}, families: v4, wantIPs: []string{"192.0.2.5"}, wantFams: []allocator.Family{allocator.IPv4}},
		{desc: "ours and MetalLB's agree", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.5", "metallb.io/loadBalancerIPs": " 192.0.2.5"}, families: v4, wantIPs: []string{"192.0.2.5"}, wantFams: []allocator.Family{allocator.IPv4}},
		{desc: "ours and MetalLB's disagree", annotations: map[string]string{paasv1.IPsAnnotation: "192.0.2.5", "metallb.universe.tf/loadBalancerIPs": "192.0.2.6"}, families: v4,
			wantErr: `annotations vip.paas.org/ips="192.0.2.5" and metallb.universe.tf/loadBalancerIPs="192.0.2.6" disagree`},
		{desc: "MetalLB's garbage names its key", annotations: map[string]string{"metallb.io/loadBalancerIPs": "nope"}, families: v4, wantErr: `annotation metallb.io/loadBalancerIPs: "nope" is not an IP address`},
		{desc: "MetalLB's loadBalancerIPs and spec disagree", annotations: map[string]string{"metallb.io/loadBalancerIPs": "192.0.2.5"}, lbIP: "192.0.2.6", families: v4, wantErr: "annotation metallb.io/loadBalancerIPs=\"192.0.2.5\" disagree"},
		{desc: "metallb.universe.tf/address-pool", annotations: map[string]string{"metallb.universe.tf/address-pool": "assisted"}, families: v4, wantGroups: []string{"assisted"}, wantFams: []allocator.Family{allocator.IPv4}},
		{desc: "two address-pool keys disagree", annotations: map[string]string{"metallb.io/address-pool": "a", "metallb.universe.tf/address-pool": "b"}, families: v4, wantErr: "disagree; keep one of them"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Annotations: tc.annotations},
				Spec: corev1.ServiceSpec{LoadBalancerIP: tc.lbIP, IPFamilies: tc.families}}
			req, err := Request(svc, nil)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want %q", err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var ips []string
			for _, a := range req.IPs {
				ips = append(ips, a.String())
			}
			if !slices.Equal(ips, tc.wantIPs) || !slices.Equal(req.Groups, tc.wantGroups) || !slices.Equal(req.Families, tc.wantFams) {
				t.Fatalf("got ips %v groups %v families %v", ips, req.Groups, req.Families)
			}
		})
	}
}

// many is an annotation value of n distinct addresses.
func many(n int) string {
	var out []string
	for i := range n {
		out = append(out, netip.AddrFrom4([4]byte{192, 0, byte(2 + i/256), byte(i)}).String())
	}
	return strings.Join(out, ",")
}

func TestParseIPGroup(t *testing.T) {
	g := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "g"}, Spec: paasv1.IPGroupSpec{
		Segment:           "192.0.2.0/24",
		ExcludedIPs:       []string{"192.0.2.0", "192.0.2.128/25"},
		NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"env": "prod"}},
		ServiceSelector:   &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "public", Operator: metav1.LabelSelectorOpExists}}},
	}}
	parsed, err := Group(g)
	if err != nil {
		t.Fatal(err)
	}
	if got := parsed.Capacity().String(); got != "127" {
		t.Errorf("capacity %s, want 127", got)
	}
	if !parsed.AutoAssign {
		t.Error("autoAssign defaults to true")
	}
	if parsed.Usable(netip.MustParseAddr("192.0.2.200")) {
		t.Error("192.0.2.200 is in the excluded /25")
	}
	if !parsed.Admits(map[string]string{"env": "prod"}, map[string]string{"public": ""}) {
		t.Error("matching namespace and Service refused")
	}
	if parsed.Admits(map[string]string{"env": "dev"}, map[string]string{"public": ""}) || parsed.Admits(map[string]string{"env": "prod"}, nil) {
		t.Error("non-matching namespace or Service admitted")
	}
	for _, bad := range []paasv1.IPGroupSpec{
		{Segment: "192.0.2.0"},
		{Segment: "192.0.2.0/24", ExcludedIPs: []string{"x"}},
		{},
		{Addresses: []string{"192.0.2.0"}},
		{Addresses: []string{"192.0.2.9-192.0.2.1"}},
		{Addresses: []string{"192.0.2.1-2001:db8::1"}},
		{Addresses: []string{"192.0.2.1-"}},
		{Addresses: []string{"192.0.2.0/28", "192.0.2.8-192.0.2.20"}},
		{Segment: "192.0.2.0/24", NamespaceSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "k", Operator: "Bogus"}}}},
	} {
		if _, err := Group(&paasv1.IPGroup{Spec: bad}); err == nil {
			t.Errorf("%+v accepted", bad)
		}
	}
}

func TestParseAddresses(t *testing.T) {
	g := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "g"}, Spec: paasv1.IPGroupSpec{
		Addresses:     []string{"192.0.2.20-192.0.2.30", " 198.51.100.0/28 ", "2001:db8::10 - 2001:db8::1f"},
		ExcludedIPs:   []string{"192.0.2.25", "2001:db8::10"},
		AvoidBuggyIPs: true,
	}}
	parsed, err := Group(g)
	if err != nil {
		t.Fatal(err)
	}
	// 11 minus an excluded one, 16 minus .0 (avoidBuggyIPs), 16 minus an excluded one.
	if got := parsed.Capacity().String(); got != "40" {
		t.Errorf("capacity %s, want 40", got)
	}
	for addr, usable := range map[string]bool{"192.0.2.20": true, "192.0.2.25": false, "192.0.2.31": false,
		"198.51.100.0": false, "198.51.100.15": true, "2001:db8::10": false, "2001:db8::1f": true} {
		if parsed.Usable(netip.MustParseAddr(addr)) != usable {
			t.Errorf("%s usable %v, want %v", addr, !usable, usable)
		}
	}
}
