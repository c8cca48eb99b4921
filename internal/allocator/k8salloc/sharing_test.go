package k8salloc

import (
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
		{desc: "Local with a selector", ann: map[string]string{paasv1.SharingKeyAnnotation: "dns"}, local: true, selector: map[string]string{"b": "2", "a": "1"}, wantKey: "dns", wantLocal: "selector a=1,b=2"},
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
}
