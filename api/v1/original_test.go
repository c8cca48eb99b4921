package v1

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func TestOriginalServiceOwner(t *testing.T) {
	svc := types.NamespacedName{Namespace: "shop", Name: "api"}
	for _, c := range []struct {
		desc   string
		labels map[string]string
		annot  map[string]string
		owner  *IPOwner
		want   bool
	}{
		{"as the original's Service controller writes it", map[string]string{IPGroupLabel: "g"}, map[string]string{OwnerAnnotation: "shop/api"}, nil, true},
		{"ours: spec.owner set", map[string]string{IPGroupLabel: "g"}, map[string]string{OwnerAnnotation: "shop/api"}, &IPOwner{Namespace: "shop", Name: "api", UID: "u"}, false},
		{"a 0.3 VirtualIP's: label gsm", map[string]string{LegacyGSMLabel: "gsm"}, map[string]string{OwnerAnnotation: "shop/api"}, nil, false},
		{"both labels: a VirtualIP's half relabelled", map[string]string{IPGroupLabel: "g", LegacyGSMLabel: "gsm"}, map[string]string{OwnerAnnotation: "shop/api"}, nil, false},
		{"no annotation", map[string]string{IPGroupLabel: "g"}, nil, nil, false},
		{"annotation is no namespace/name", map[string]string{IPGroupLabel: "g"}, map[string]string{OwnerAnnotation: "api"}, nil, false},
		{"annotation with an empty half", map[string]string{IPGroupLabel: "g"}, map[string]string{OwnerAnnotation: "shop/"}, nil, false},
	} {
		ip := &IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.2", Labels: c.labels, Annotations: c.annot}, Spec: IPSpec{Owner: c.owner}}
		got, ok := OriginalServiceOwner(ip)
		if ok != c.want || (ok && got != svc) {
			t.Errorf("%s: got %v %v, want %v", c.desc, got, ok, c.want)
		}
	}
}

func TestIsOriginalImage(t *testing.T) {
	for image, want := range map[string]bool{
		"docker.io/paasteam324/vip-allocator-operator:1.0":              true, // 1.0's bundle
		"docker.io/paasteam324/vip-allocator-operator:0.3":              true,
		"paasteam324/vip-allocator-operator":                            true,
		"registry.local:5000/mirror/paasteam324/vip-allocator-operator": true,
		"quay.io/paasteam324/vip-allocator-operator@sha256:0123":        true,
		"ghcr.io/paas-org/vip-allocator-operator:1.2":                   false, // ours
		"gcr.io/kubebuilder/kube-rbac-proxy:v0.5.0":                     false, // its sidecar
		"docker.io/other/paasteam324-vip-allocator-operator:1.0":        false,
	} {
		if got := IsOriginalImage(image); got != want {
			t.Errorf("IsOriginalImage(%q) = %v, want %v", image, got, want)
		}
	}
}
