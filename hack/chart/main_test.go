package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestBundleNamespace(t *testing.T) {
	if bundleNamespace != paasv1.DefaultNamespace {
		t.Fatalf("bundleNamespace %q, the bundle installs into %q", bundleNamespace, paasv1.DefaultNamespace)
	}
}

func TestSetImage(t *testing.T) {
	const values = "image:\n  repository: a/b\n  tag: \"1\"\n  digest: \"\"\n  registry: \"\"\n"
	for image, want := range map[string]string{
		"mirror.example:5000/paas/vip-allocator:1.2.3":                    "  repository: mirror.example:5000/paas/vip-allocator\n  tag: \"1.2.3\"\n  digest: \"\"\n",
		"mirror.example/vip-allocator@sha256:" + strings.Repeat("ab", 32): "  repository: mirror.example/vip-allocator\n  tag: \"\"\n  digest: \"sha256:" + strings.Repeat("ab", 32) + "\"\n",
	} {
		path := filepath.Join(t.TempDir(), "values.yaml")
		if err := os.WriteFile(path, []byte(values), 0o644); err != nil {
			t.Fatal(err)
		}
		if err := setImage(path, image); err != nil {
			t.Fatal(err)
		}
		got, _ := os.ReadFile(path)
		if string(got) != "image:\n"+want+"  registry: \"\"\n" {
			t.Errorf("%s: values.yaml\n%s", image, got)
		}
	}
}

// A kind the chart has no place for stops the generator rather than being left out.
func TestUnknownKindIsRefused(t *testing.T) {
	_, _, err := templates([]object{{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "x"}}}, nil, nil)
	if err == nil || !strings.Contains(err.Error(), "no template for this kind") {
		t.Fatalf("got %v", err)
	}
}
