//go:build envtest

package install

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// renderIn runs hack/bundle.sh yaml on a copy of config/, so the repository's
// files stay as they are, and returns the copy's root and the script's output.
func renderIn(t *testing.T, img string) (string, string, error) {
	t.Helper()
	repo, dir := testenv.RepoRoot(), t.TempDir()
	if out, err := exec.Command("cp", "-r", filepath.Join(repo, "config"), filepath.Join(repo, "hack"), filepath.Join(repo, "charts"),
		filepath.Join(repo, "go.mod"), filepath.Join(repo, "go.sum"), dir).CombinedOutput(); err != nil {
		t.Fatalf("copy: %v %s", err, out)
	}
	cmd := exec.Command(filepath.Join(dir, "hack", "bundle.sh"), "yaml", img)
	cmd.Env = append(os.Environ(), "KUBECTL="+filepath.Join(repo, "bin", "k8s", "kubectl"))
	out, err := cmd.CombinedOutput()
	return dir, string(out), err
}

func TestBundleYAMLRewritesTheOnlyImage(t *testing.T) {
	for _, img := range []string{
		"mirror.example:5000/paas/vip-allocator:1.2.3",
		"mirror.example/paas/vip-allocator@sha256:" + strings.Repeat("ab", 32),
	} {
		dir, out, err := renderIn(t, img)
		if err != nil {
			t.Fatalf("%s: %v\n%s", img, err, out)
		}
		for _, f := range []string{"deploy/bundle.yaml", "deploy/bundle-openshift.yaml"} {
			data, err := os.ReadFile(filepath.Join(dir, f))
			if err != nil {
				t.Fatal(err)
			}
			var images []string
			for _, line := range strings.Split(string(data), "\n") {
				if v, ok := strings.CutPrefix(strings.TrimSpace(line), "image: "); ok {
					images = append(images, v)
				}
			}
			if !reflect.DeepEqual(images, []string{img}) {
				t.Errorf("%s with IMG=%s: images %v", f, img, images)
			}
		}
		// The chart's default image follows (its rendering is checked against
		// the bundle by make verify).
		values, err := os.ReadFile(filepath.Join(dir, "charts", "vip-allocator", "values.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		var repo, tag, digest string
		if i := strings.Index(img, "@"); i >= 0 {
			repo, digest = img[:i], img[i+1:]
		} else {
			i := strings.LastIndex(img, ":")
			repo, tag = img[:i], img[i+1:]
		}
		if want := fmt.Sprintf("  repository: %s\n  tag: %q\n  digest: %q\n", repo, tag, digest); !strings.Contains(string(values), want) {
			t.Errorf("the chart's values.yaml with IMG=%s does not hold\n%s", img, want)
		}
	}
	if _, out, err := renderIn(t, "vip-allocator"); err == nil || !strings.Contains(out, "names no tag or digest") {
		t.Fatalf("an image without tag must be refused with the reason, got %v: %s", err, out)
	}
}

func TestOpenShiftBundleIsTheBundlePlusTheAgentSCC(t *testing.T) {
	plain := readObjects(t, "deploy/bundle.yaml")
	openshift := readObjects(t, "deploy/bundle-openshift.yaml")
	var scc *unstructured.Unstructured
	var rest []*unstructured.Unstructured
	for _, o := range openshift {
		if o.GetKind() == "SecurityContextConstraints" {
			scc = o
		} else {
			rest = append(rest, o)
		}
	}
	if scc == nil || !reflect.DeepEqual(rest, plain) {
		t.Fatalf("want deploy/bundle.yaml plus one SCC (scc found: %v, same objects otherwise: %v)", scc != nil, reflect.DeepEqual(rest, plain))
	}
	get := func(path ...string) any { v, _, _ := unstructured.NestedFieldNoCopy(scc.Object, path...); return v }
	for _, tc := range []struct {
		path []string
		want any
	}{
		{[]string{"allowHostNetwork"}, true},
		{[]string{"allowPrivilegedContainer"}, false},
		{[]string{"allowPrivilegeEscalation"}, false},
		{[]string{"allowHostPID"}, false},
		{[]string{"allowHostIPC"}, false},
		{[]string{"allowHostPorts"}, false},
		{[]string{"allowedCapabilities"}, []any{"NET_ADMIN", "NET_RAW"}},
		{[]string{"requiredDropCapabilities"}, []any{"ALL"}},
		{[]string{"runAsUser", "type"}, "RunAsAny"},
		{[]string{"seLinuxContext", "type"}, "MustRunAs"},
	} {
		if got := get(tc.path...); !reflect.DeepEqual(got, tc.want) {
			t.Errorf("SCC %s: %v, want %v", strings.Join(tc.path, "."), got, tc.want)
		}
	}
	// No fixed UID anywhere: OpenShift's restricted-v2 assigns one per namespace.
	for _, f := range []string{"deploy/bundle-openshift.yaml", "bundle/manifests/vip-allocator-operator.clusterserviceversion.yaml"} {
		data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), f))
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(data), "runAsUser: ") && !strings.Contains(string(data), "runAsUser:\n  type: RunAsAny") {
			t.Errorf("%s fixes a UID", f)
		}
	}
}

func TestOLMBundle(t *testing.T) {
	repo := testenv.RepoRoot()
	csvObjs := readObjects(t, "bundle/manifests/vip-allocator-operator.clusterserviceversion.yaml")
	if len(csvObjs) != 1 {
		t.Fatalf("want one CSV, got %d", len(csvObjs))
	}
	var csv struct {
		Metadata struct {
			Annotations map[string]string `json:"annotations"`
		} `json:"metadata"`
		Spec struct {
			CRDs struct {
				Owned []struct{ Name, Kind, Description string } `json:"owned"`
			} `json:"customresourcedefinitions"`
			InstallModes []struct {
				Type      string `json:"type"`
				Supported bool   `json:"supported"`
			} `json:"installModes"`
			Install struct {
				Spec struct {
					Deployments []struct {
						Name string `json:"name"`
						Spec struct {
							Template struct {
								Spec struct {
									Containers []struct{ Image string } `json:"containers"`
								} `json:"spec"`
							} `json:"template"`
						} `json:"spec"`
					} `json:"deployments"`
					ClusterPermissions []struct {
						ServiceAccountName string `json:"serviceAccountName"`
					} `json:"clusterPermissions"`
					Permissions []struct {
						ServiceAccountName string `json:"serviceAccountName"`
					} `json:"permissions"`
				} `json:"spec"`
			} `json:"install"`
			RelatedImages []struct{ Name, Image string } `json:"relatedImages"`
		} `json:"spec"`
	}
	raw, _ := json.Marshal(csvObjs[0].Object)
	if err := json.Unmarshal(raw, &csv); err != nil {
		t.Fatal(err)
	}
	ann := csv.Metadata.Annotations
	if ann["features.operators.openshift.io/disconnected"] != "true" {
		t.Error("the CSV must announce disconnected support")
	}
	var examples []map[string]any
	if err := json.Unmarshal([]byte(ann["alm-examples"]), &examples); err != nil || !slices.ContainsFunc(examples, func(e map[string]any) bool { return e["kind"] == "IPGroup" }) {
		t.Errorf("alm-examples must hold the IPGroup sample: %v %v", examples, err)
	}
	var owned []string
	for _, c := range csv.Spec.CRDs.Owned {
		if c.Description == "" {
			t.Errorf("owned CRD %s has no description", c.Name)
		}
		owned = append(owned, c.Name)
	}
	slices.Sort(owned)
	if want := []string{"bgppeers.paas.org", "groupsegmentmappings.paas.org", "ipgroups.paas.org", "ips.paas.org", "nodeviews.paas.org", "virtualips.paas.org"}; !reflect.DeepEqual(owned, want) {
		t.Errorf("owned CRDs %v, want %v", owned, want)
	}
	for _, m := range csv.Spec.InstallModes {
		if m.Supported != (m.Type == "AllNamespaces") {
			t.Errorf("install mode %s supported=%v: the operator serves every namespace", m.Type, m.Supported)
		}
	}
	deps := csv.Spec.Install.Spec.Deployments
	if len(deps) != 1 || deps[0].Name != "vip-allocator-operator" {
		t.Fatalf("deployments %+v", deps)
	}
	image := deps[0].Spec.Template.Spec.Containers[0].Image
	if len(csv.Spec.RelatedImages) != 1 || csv.Spec.RelatedImages[0].Image != image || ann["containerImage"] != image {
		t.Errorf("related images %+v / containerImage %s, want the operator's %s", csv.Spec.RelatedImages, ann["containerImage"], image)
	}
	var accounts []string
	for _, p := range csv.Spec.Install.Spec.ClusterPermissions {
		accounts = append(accounts, "cluster:"+p.ServiceAccountName)
	}
	for _, p := range csv.Spec.Install.Spec.Permissions {
		accounts = append(accounts, "ns:"+p.ServiceAccountName)
	}
	slices.Sort(accounts)
	if want := []string{"cluster:vip-allocator-agent", "cluster:vip-allocator-operator", "ns:vip-allocator-agent", "ns:vip-allocator-operator"}; !reflect.DeepEqual(accounts, want) {
		t.Errorf("permissions for %v, want %v", accounts, want)
	}
	meta, err := os.ReadFile(filepath.Join(repo, "bundle", "metadata", "annotations.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var annotations struct{ Annotations map[string]string }
	if err := yaml.Unmarshal(meta, &annotations); err != nil || annotations.Annotations["operators.operatorframework.io.bundle.package.v1"] != "vip-allocator-operator" {
		t.Errorf("bundle metadata: %v %v", annotations, err)
	}
	sdk := filepath.Join(repo, "bin", "operator-sdk")
	if _, err := os.Stat(sdk); err != nil {
		t.Fatal("bin/operator-sdk is missing: run 'make operator-sdk' (make test does)")
	}
	cmd := exec.Command(sdk, "bundle", "validate", "./bundle", "--select-optional", "suite=operatorframework")
	cmd.Dir = repo
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("operator-sdk bundle validate: %v\n%s", err, out)
	}
}

// openshiftAPI pins the openshift/api module whose CRD manifest of
// SecurityContextConstraints the OpenShift bundle is checked against (read from
// the Go module cache; nothing of it is compiled in).
const openshiftAPI = "github.com/openshift/api@v0.0.0-20251015095338-264e80a2b6e7"

func TestOpenShiftBundleIsAcceptedWithTheRealSCCSchema(t *testing.T) {
	out, err := exec.Command("go", "mod", "download", "-json", openshiftAPI).Output()
	if err != nil {
		t.Fatalf("go mod download %s: %v", openshiftAPI, err)
	}
	var mod struct{ Dir string }
	if err := json.Unmarshal(out, &mod); err != nil || mod.Dir == "" {
		t.Fatalf("go mod download: %s %v", out, err)
	}
	c := startCluster(t)
	c.mustKubectl(t, "create", "-f", filepath.Join(mod.Dir, "security", "v1", "zz_generated.crd-manifests", "0000_03_config-operator_01_securitycontextconstraints.crd.yaml"))
	c.mustKubectl(t, "wait", "--for", "condition=Established", "--timeout", "60s", "crd/securitycontextconstraints.security.openshift.io")
	c.mustKubectl(t, "create", "namespace", namespace)
	created := c.mustKubectl(t, "create", "-f", "deploy/bundle-openshift.yaml")
	if n, want := strings.Count(created, " created"), len(readObjects(t, "deploy/bundle-openshift.yaml")); n != want {
		t.Fatalf("%d of %d objects created:\n%s", n, want, created)
	}
	caps := c.mustKubectl(t, "get", "securitycontextconstraints.security.openshift.io", "vip-allocator-agent", "-o", "jsonpath={.allowedCapabilities}")
	if caps != `["NET_ADMIN","NET_RAW"]` {
		t.Fatalf("SCC as stored: allowedCapabilities %s", caps)
	}
}

// TestVerifyCatchesStaleInstallFiles runs the check 'make verify' runs on a
// copy of the repository: clean, then after a change to config/ that the
// committed deploy/, bundle/ and chart do not have, then after a change of
// the chart's values that makes it install something else than the bundle.
func TestVerifyCatchesStaleInstallFiles(t *testing.T) {
	repo, dir := testenv.RepoRoot(), t.TempDir()
	files, err := exec.Command("git", "-C", repo, "ls-files", "Makefile", "hack", "config", "deploy", "bundle", "bundle.Dockerfile",
		"charts", "go.mod", "go.sum").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range strings.Fields(string(files)) {
		if err := os.MkdirAll(filepath.Join(dir, filepath.Dir(f)), 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command("cp", "-p", filepath.Join(repo, f), filepath.Join(dir, f)).CombinedOutput(); err != nil {
			t.Fatalf("%v %s", err, out)
		}
	}
	if err := os.Symlink(filepath.Join(repo, "bin"), filepath.Join(dir, "bin")); err != nil {
		t.Fatal(err)
	}
	verify := func() (string, error) {
		// -o: the tools are there; never rebuild them from the copy.
		out, err := exec.Command("make", "-C", dir, "--no-print-directory", "verify-install-files",
			"-o", filepath.Join(dir, "bin", "k8s", "kubectl"), "-o", filepath.Join(dir, "bin", "operator-sdk"),
			"-o", filepath.Join(dir, "bin", "helm")).CombinedOutput()
		return string(out), err
	}
	if out, err := verify(); err != nil {
		t.Fatalf("the committed install files are stale (run make bundle-yaml bundle): %s", out)
	}
	edit := func(rel, from, to string) {
		t.Helper()
		path := filepath.Join(dir, rel)
		data, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(data), from) {
			t.Fatalf("%s has no %q", rel, from)
		}
		if err := os.WriteFile(path, []byte(strings.Replace(string(data), from, to, 1)), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	edit("config/manager/manager.yaml", "cpu: 50m", "cpu: 60m")
	if out, err := verify(); err == nil || !strings.Contains(out, "were stale relative to config/") {
		t.Fatalf("a change to config/manager must make the check fail: %v %s", err, out)
	}
	// The failed check regenerated deploy/ and the chart's templates: clean again,
	// but for the chart's values, which are written by hand.
	out, err := verify()
	if err == nil || !strings.Contains(out, "the chart's rendering differs from deploy/bundle.yaml") ||
		!strings.Contains(out, "Deployment vip-allocator-operator/vip-allocator-operator .spec.template.spec.containers[0].resources.requests.cpu: bundle 60m, chart 50m") {
		t.Fatalf("the chart's values must be found out of step with config/manager: %v %s", err, out)
	}
	edit("charts/vip-allocator/values.yaml", "cpu: 50m", "cpu: 60m")
	if out, err := verify(); err != nil {
		t.Fatalf("config/, deploy/ and the chart agree again: %v %s", err, out)
	}
	// A template edited by hand is drift too.
	edit("charts/vip-allocator/templates/generated-rbac.yaml", "  - watch\n", "  - watch\n  - delete\n")
	if out, err := verify(); err == nil || !strings.Contains(out, "were stale relative to config/") {
		t.Fatalf("a generated template edited by hand must make the check fail: %v %s", err, out)
	}
}
