package v1

import (
	"testing"
)

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
