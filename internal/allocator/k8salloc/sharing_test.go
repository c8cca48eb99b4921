package k8salloc

import (
	"errors"
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

func TestSharingOf(t *testing.T) {
	ports := []corev1.ServicePort{{Port: 53}, {Protocol: corev1.ProtocolUDP, Port: 53}}
	for _, tc := range []struct {
		desc      string
		ann       map[string]string
		local     bool
		selector  map[string]string
		wantKey   string
		wantCross []string
		wantLocal string
		wantErr   string
	}{
		{desc: "no key: no sharing"},
		{desc: "our key", ann: map[string]string{paasv1.SharingKeyAnnotation: "dns"}, wantKey: "dns"},
		{desc: "MetalLB's", ann: map[string]string{paasv1.MetalLBSharingAnnotation: "dns"}, wantKey: "dns"},
		{desc: "MetalLB's old one", ann: map[string]string{paasv1.MetalLBLegacySharingAnnotation: "dns"}, wantKey: "dns"},
		{desc: "Cilium's, with its cross-namespace list", ann: map[string]string{paasv1.CiliumSharingKeyAnnotation: "dns", paasv1.CiliumSharingCrossNamespaceAnnotation: "b, c,b"}, wantKey: "dns", wantCross: []string{"b", "c"}},
		{desc: "ours and MetalLB's agreeing", ann: map[string]string{paasv1.SharingKeyAnnotation: "dns", paasv1.MetalLBSharingAnnotation: "dns"}, wantKey: "dns"},
		{desc: "ours and Cilium's disagreeing", ann: map[string]string{paasv1.SharingKeyAnnotation: "dns", paasv1.CiliumSharingKeyAnnotation: "ntp"}, wantErr: "disagree"},
		{desc: "every namespace", ann: map[string]string{paasv1.SharingKeyAnnotation: "dns", paasv1.SharingCrossNamespaceAnnotation: "*"}, wantKey: "dns", wantCross: []string{"*"}},
		{desc: "odd characters", ann: map[string]string{paasv1.SharingKeyAnnotation: "dns;rm -rf"}, wantErr: "is not a sharing key; write at most 63 letters"},
		{desc: "too long, clipped in the message", ann: map[string]string{paasv1.SharingKeyAnnotation: strings.Repeat("k", 10000)}, wantErr: "...\" is not a sharing key"},
		{desc: "a namespace that is none", ann: map[string]string{paasv1.SharingKeyAnnotation: "dns", paasv1.SharingCrossNamespaceAnnotation: "Bad_NS"}, wantErr: "is not a namespace; write namespace names"},
		{desc: "Local with a selector", ann: map[string]string{paasv1.SharingKeyAnnotation: "dns"}, local: true, selector: map[string]string{"b": "2", "a": "1"}, wantKey: "dns", wantLocal: "selector a=1,b=2 in namespace ns"},
		{desc: "Local without a selector", ann: map[string]string{paasv1.SharingKeyAnnotation: "dns"}, local: true, wantKey: "dns", wantLocal: "the endpoints of Service ns/svc"},
	} {
		svc := &corev1.Service{}
		svc.Namespace, svc.Name, svc.Annotations = "ns", "svc", tc.ann
		svc.Spec.Ports, svc.Spec.Selector = ports, tc.selector
		if tc.local {
			svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		}
		got, err := SharingOf(svc)
		if tc.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("%s: error %v, want %q", tc.desc, err, tc.wantErr)
			}
			if err != nil && len(err.Error()) > 400 {
				t.Errorf("%s: message of %d bytes", tc.desc, len(err.Error()))
			}
			continue
		}
		if err != nil {
			t.Errorf("%s: %v", tc.desc, err)
			continue
		}
		if got.Key != tc.wantKey || !slices.Equal(got.CrossNamespace, tc.wantCross) || got.LocalEndpoints != tc.wantLocal {
			t.Errorf("%s: got %+v", tc.desc, got)
		}
		if tc.wantKey != "" && !slices.Equal(got.Ports, []allocator.Port{{Protocol: "TCP", Port: 53}, {Protocol: "UDP", Port: 53}}) {
			t.Errorf("%s: ports %v", tc.desc, got.Ports)
		}
	}
	if allocator.MaxSharers != paasv1.MaxSharers {
		t.Errorf("allocator.MaxSharers %d, api MaxSharers %d", allocator.MaxSharers, paasv1.MaxSharers)
	}
	if allocator.MaxSharedPorts != paasv1.MaxSharedPorts {
		t.Errorf("allocator.MaxSharedPorts %d, api MaxSharedPorts %d", allocator.MaxSharedPorts, paasv1.MaxSharedPorts)
	}
}

// TestLocalSharing runs two Services of one sharing key through Request and
// the real allocator: a second externalTrafficPolicy Local Service joins the
// first's address only when its endpoints are the same Pods, which a selector
// names within the Service's own namespace only.
func TestLocalSharing(t *testing.T) {
	app := map[string]string{"app": "dns"}
	type svc struct {
		ns       string
		local    bool
		selector map[string]string
	}
	for _, tc := range []struct {
		desc    string
		first   svc
		second  svc
		wantErr error // nil: the second joins the first's address
	}{
		{desc: "Local, one namespace, same selector", first: svc{"a", true, app}, second: svc{"a", true, app}},
		{desc: "Local, one namespace, other selector", first: svc{"a", true, app}, second: svc{"a", true, map[string]string{"app": "web"}}, wantErr: allocator.ErrSharedEndpointsDiffer},
		{desc: "Local, two namespaces, same selector: other Pods", first: svc{"a", true, app}, second: svc{"b", true, app}, wantErr: allocator.ErrSharedEndpointsDiffer},
		{desc: "Local without a selector", first: svc{"a", true, nil}, second: svc{"a", true, nil}, wantErr: allocator.ErrSharedEndpointsDiffer},
		{desc: "Cluster beside Local in another namespace", first: svc{"a", true, app}, second: svc{"b", false, app}},
		{desc: "Cluster, two namespaces", first: svc{"a", false, app}, second: svc{"b", false, nil}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			a := allocator.New()
			g, err := allocator.NewGroup(allocator.Group{Name: "lan", Segment: netip.MustParsePrefix("192.0.2.0/24"), AutoAssign: true})
			if err != nil {
				t.Fatal(err)
			}
			a.SetGroups([]*allocator.Group{g})
			var got [2][]netip.Addr
			var errs [2]error
			for i, s := range []svc{tc.first, tc.second} {
				obj := &corev1.Service{}
				obj.Namespace, obj.Name = s.ns, "svc"+string(rune('1'+i))
				obj.Annotations = map[string]string{paasv1.SharingKeyAnnotation: "k", paasv1.SharingCrossNamespaceAnnotation: "*"}
				obj.Spec.Selector = s.selector
				obj.Spec.Ports = []corev1.ServicePort{{Protocol: []corev1.Protocol{corev1.ProtocolTCP, corev1.ProtocolUDP}[i], Port: 53}}
				if s.local {
					obj.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
				}
				req, err := Request(obj, nil)
				if err != nil {
					t.Fatal(err)
				}
				got[i], errs[i] = a.Allocate(obj.Namespace+"/"+obj.Name, req)
			}
			if errs[0] != nil {
				t.Fatalf("first: %v", errs[0])
			}
			if tc.wantErr != nil {
				if !errors.Is(errs[1], tc.wantErr) || len(got[1]) != 0 {
					t.Fatalf("second: %v, %v; want no address and %v", got[1], errs[1], tc.wantErr)
				}
				return
			}
			if errs[1] != nil || !slices.Equal(got[0], got[1]) {
				t.Fatalf("second: %v, %v; want %v", got[1], errs[1], got[0])
			}
		})
	}
}
