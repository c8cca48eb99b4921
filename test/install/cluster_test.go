//go:build envtest

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
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/cmd"
	"github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/test/operatortest"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// cluster is an empty control plane and a kubectl pointed at it as admin.
type cluster struct {
	root       string
	kubectlBin string
	kubeconfig string
	base       *rest.Config
	admin      *rest.Config
	env        *envtest.Environment
	apiLog     *syncBuffer // the API server's stderr, shown when an uninstall hangs
}

// syncBuffer is a bytes.Buffer the API server process and the test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// tail is the last n lines written.
func (b *syncBuffer) tail(n int) string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return testenv.Tail(b.buf.String(), n)
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
	env := &envtest.Environment{BinaryAssetsDirectory: assets, Scheme: paasv1.NewScheme()}
	apiLog := &syncBuffer{}
	env.ControlPlane.GetAPIServer().Err = apiLog
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
	return &cluster{apiLog: apiLog, root: root, kubectlBin: filepath.Join(assets, "kubectl"), kubeconfig: path, base: cfg, admin: admin.Config(), env: env}
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

// mustKubectl fails t, the (sub)test that runs it, when kubectl does.
func (c *cluster) mustKubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := c.kubectl("", args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// uninstall deletes the objects of a bundle file and waits until they are gone,
// as a user's 'kubectl delete -f' does. A CRD goes only after the API server's
// finalizer has removed its instances (it polls every 5 s), so on a loaded
// machine this may take a while; when it takes too long the CRDs' conditions
// and the API server's last log lines say why.
func (c *cluster) uninstall(t *testing.T, file string) {
	t.Helper()
	c.waitListable(t, file)
	if _, err := c.kubectl("", "delete", "-f", file, "--timeout=5m"); err != nil {
		crds, _ := c.kubectl("", "get", "crd", "-o", "jsonpath={range .items[*]}{.metadata.name}: {.status.conditions}{\"\\n\"}{end}")
		t.Fatalf("%v\nCRDs left:\n%s\nAPI server log:\n%s", err, crds, c.apiLog.tail(60))
	}
}

// waitListable waits until the API server serves lists of every custom
// resource the file defines. A CRD deleted while its storage still
// initialises (seconds after it was created) fails the API server's
// instance-deletion step, which then backs off for minutes: a known
// apiextensions behaviour (operator-framework/operator-controller#1437)
// that no real uninstall, minutes after an install, runs into.
func (c *cluster) waitListable(t *testing.T, file string) {
	t.Helper()
	for _, o := range readObjects(t, file) {
		if o.GetKind() != "CustomResourceDefinition" {
			continue
		}
		deadline := time.Now().Add(time.Minute)
		for {
			out, err := c.kubectl("", "get", o.GetName(), "-A", "-o", "name")
			if err == nil {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s never became listable: %s", o.GetName(), out)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
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

// tokenClient authenticates with a ServiceAccount token, as a pod does.
func (c *cluster) tokenClient(t *testing.T, token string) client.WithWatch {
	cfg := &rest.Config{Host: c.base.Host, BearerToken: token, TLSClientConfig: rest.TLSClientConfig{CAData: c.base.CAData}}
	cl, err := client.NewWithWatch(cfg, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	return cl
}

// runOperatorServingMetrics runs the operator in-process as its ServiceAccount
// (impersonated: the RBAC is the bundle's), with leader election, deploying the agent,
// and the metrics served as the bundle serves them (TLS, authenticated and authorized)
// on metricsAddr.
func (c *cluster) runOperatorServingMetrics(t *testing.T, image, metricsAddr string) (stop func()) {
	return c.runOperatorWith(t, cmd.OperatorOptions{MetricsAddr: metricsAddr, MetricsSecure: true, ProbeAddr: "0", Workers: 2, IPMode: "Proxy",
		LeaderElect: true, Agent: agent.Options{Namespace: namespace, Image: image}})
}

// runOperatorWith runs the operator in-process with options o, as its ServiceAccount.
func (c *cluster) runOperatorWith(t *testing.T, o cmd.OperatorOptions) (stop func()) {
	cfg := rest.CopyConfig(c.admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: operatorUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace, "system:authenticated"}}
	end, err := operatortest.Start(cfg, o)
	testenv.Must(t, err)
	stop = func() { _ = end() }
	t.Cleanup(stop)
	return stop
}
