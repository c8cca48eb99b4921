package cmd

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"
)

// krewPlugin is what krew reads of a plugin manifest.
type krewPlugin struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Metadata   struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		Version          string `json:"version"`
		Homepage         string `json:"homepage"`
		ShortDescription string `json:"shortDescription"`
		Description      string `json:"description"`
		Caveats          string `json:"caveats"`
		Platforms        []struct {
			Selector struct {
				MatchLabels map[string]string `json:"matchLabels"`
			} `json:"selector"`
			URI    string `json:"uri"`
			SHA256 string `json:"sha256"`
			Bin    string `json:"bin"`
			Files  []struct {
				From string `json:"from"`
				To   string `json:"to"`
			} `json:"files"`
		} `json:"platforms"`
	} `json:"spec"`
}

// TestKrewManifest: deploy/krew/vip.yaml is a krew plugin manifest that
// installs this binary as kubectl-vip (so kubectl runs it as "kubectl vip"),
// for the version the Makefile builds, from that release's archive of each platform.
func TestKrewManifest(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(repoRoot(), "deploy", "krew", "vip.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var p krewPlugin
	if err := yaml.UnmarshalStrict(b, &p); err != nil {
		t.Fatalf("deploy/krew/vip.yaml: %v", err)
	}
	if p.APIVersion != "krew.googlecontainertools.github.com/v1alpha2" || p.Kind != "Plugin" {
		t.Errorf("apiVersion %q kind %q, want krew.googlecontainertools.github.com/v1alpha2 Plugin", p.APIVersion, p.Kind)
	}
	if want := strings.TrimPrefix(PluginName, "kubectl-"); p.Metadata.Name != want {
		t.Errorf("name %q, want %q (kubectl %s)", p.Metadata.Name, want, want)
	}
	makefile, err := os.ReadFile(filepath.Join(repoRoot(), "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	m := regexp.MustCompile(`(?m)^VERSION \?= (\S+)$`).FindSubmatch(makefile)
	if m == nil {
		t.Fatal("the Makefile sets no VERSION")
	}
	if want := "v" + string(m[1]); p.Spec.Version != want {
		t.Errorf("version %q, want the Makefile's %q", p.Spec.Version, want)
	}
	if p.Spec.ShortDescription == "" || p.Spec.Description == "" || !strings.HasPrefix(p.Spec.Homepage, "https://") {
		t.Errorf("shortDescription %q, description %q, homepage %q: want all three", p.Spec.ShortDescription, p.Spec.Description, p.Spec.Homepage)
	}
	if !strings.Contains(p.Spec.Caveats, PluginCompletionName) {
		t.Errorf("caveats do not say how to link %s for completion", PluginCompletionName)
	}
	platforms := map[string]bool{}
	sha := regexp.MustCompile(`^[0-9a-f]{64}$`)
	for _, pl := range p.Spec.Platforms {
		os, arch := pl.Selector.MatchLabels["os"], pl.Selector.MatchLabels["arch"]
		platform := os + "/" + arch
		platforms[platform] = true
		archive := "kubectl-vip_" + p.Spec.Version + "_" + os + "_" + arch + ".tar.gz"
		if want := p.Spec.Homepage + "/releases/download/" + p.Spec.Version + "/" + archive; pl.URI != want {
			t.Errorf("%s: uri %q, want %q", platform, pl.URI, want)
		}
		if !sha.MatchString(pl.SHA256) {
			t.Errorf("%s: sha256 %q is not one", platform, pl.SHA256)
		}
		if pl.Bin != PluginName {
			t.Errorf("%s: bin %q, want %q", platform, pl.Bin, PluginName)
		}
		if len(pl.Files) != 1 || pl.Files[0].From != PluginName || pl.Files[0].To != "." {
			t.Errorf("%s: files %+v, want %s to .", platform, pl.Files, PluginName)
		}
	}
	for _, want := range []string{"linux/amd64", "linux/arm64"} {
		if !platforms[want] {
			t.Errorf("no platform %s", want)
		}
	}
}
