// Package install tests what a user installs: deploy/bundle.yaml applied with a
// real kubectl to a real kube-apiserver and etcd (with nothing pre-installed),
// the OpenShift variant, the OLM bundle, and the image's root filesystem.
package install

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/paas-org/vip-allocator-operator/cmd"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// cluster is an empty control plane and a kubectl pointed at it as admin.
type cluster struct {
	t          *testing.T
	root       string
	kubectlBin string
	kubeconfig string
	base       *rest.Config
	admin      *rest.Config
	env        *envtest.Environment
}

func startCluster(t *testing.T) *cluster {
	root := testenv.RepoRoot()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl"} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			t.Fatalf("%s/%s is missing: run 'make controlplane' (make test does)", assets, b)
		}
	}
	// No CRDs, RBAC or policies: the bundle must bring everything itself.
	env := &envtest.Environment{BinaryAssetsDirectory: assets, Scheme: cmd.Scheme()}
	cfg, err := env.Start()
	if err != nil {
		t.Fatalf("start control plane: %v", err)
	}
	t.Cleanup(func() { _ = env.Stop() })
	admin, err := env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, cfg)
	if err != nil {
		t.Fatal(err)
	}
	kc, err := admin.KubeConfig()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	return &cluster{t: t, root: root, kubectlBin: filepath.Join(assets, "kubectl"), kubeconfig: path, base: cfg, admin: admin.Config(), env: env}
}

// kubectl runs the real kubectl; stdin, when given, is piped in.
func (c *cluster) kubectl(stdin string, args ...string) (string, error) {
	cmd := exec.Command(c.kubectlBin, append([]string{"--kubeconfig", c.kubeconfig}, args...)...)
	cmd.Dir = c.root
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w\n%s", strings.Join(args, " "), err, out)
	}
	return string(out), nil
}

func (c *cluster) mustKubectl(args ...string) string {
	c.t.Helper()
	out, err := c.kubectl("", args...)
	if err != nil {
		c.t.Fatal(err)
	}
	return out
}

// readObjects parses a multi-document YAML file of the repository.
func readObjects(t *testing.T, rel string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatalf("%v (run 'make bundle-yaml')", err)
	}
	objs, err := parseObjects(data)
	if err != nil {
		t.Fatalf("%s: %v", rel, err)
	}
	return objs
}

func parseObjects(data []byte) ([]*unstructured.Unstructured, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []*unstructured.Unstructured
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(obj.Object) > 0 {
			out = append(out, obj)
		}
	}
}

// ref names an object the way kubectl get takes it: kind.group/name.
func ref(o *unstructured.Unstructured) string {
	gvk := o.GroupVersionKind()
	kind := strings.ToLower(gvk.Kind)
	if gvk.Group != "" {
		kind += "." + gvk.Group
	}
	return kind + "/" + o.GetName()
}
