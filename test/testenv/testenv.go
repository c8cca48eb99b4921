// Package testenv runs the real kube-apiserver and etcd (built into bin/k8s by
// 'make controlplane') with this project's CRDs, RBAC and admission policies
// installed from config/, and hands out clients for two identities: a cluster
// admin, and the operator's ServiceAccount (so tests run the operator with the
// exact permissions config/ grants it; test/operatortest runs the operator
// with them). It holds what the test packages share: the Service they
// start from (LoadBalancerService), waiting for a condition (Eventually),
// failing at an error (Must) and a log's last lines (Tail).
package testenv

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// OperatorNamespace and OperatorUser are the operator's ServiceAccount, and
// AgentUser the agents', as config/ names them.
const (
	OperatorNamespace = "vip-allocator-operator"
	OperatorUser      = "system:serviceaccount:vip-allocator-operator:vip-allocator-operator"
	AgentUser         = "system:serviceaccount:vip-allocator-operator:vip-allocator-agent"
	// NodeNameExtra is the user extra in which kube-apiserver names the node
	// a Pod-bound ServiceAccount token's Pod runs on; the agents' admission
	// policies hold each agent to that node's objects.
	NodeNameExtra = "authentication.kubernetes.io/node-name"
)

// Env is a running control plane.
type Env struct {
	env *envtest.Environment
	// Root is the repository root.
	Root string
	// Admin is a cluster-admin client (system:masters).
	Admin       client.Client
	AdminConfig *rest.Config
	// OperatorConfig authenticates as the operator's ServiceAccount.
	OperatorConfig *rest.Config
	// Operator is a client with the operator's identity.
	Operator client.Client
	admin    *envtest.AuthenticatedUser
}

// RepoRoot finds the repository root from this file's location.
func RepoRoot() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// Start starts etcd and kube-apiserver and installs config/crd, config/rbac and
// config/admission. The Service ClusterIP range is large and dual-stack, so
// thousands of Services fit and dual-stack Services can be created.
// apiServerFlags ("name=value") are added to kube-apiserver's: e.g.
// "feature-gates=StrictIPCIDRValidation=false" stores what older clusters did.
func Start(apiServerFlags ...string) (*Env, error) {
	root := RepoRoot()
	assets := os.Getenv("KUBEBUILDER_ASSETS")
	if assets == "" {
		assets = filepath.Join(root, "bin", "k8s")
	}
	if _, err := os.Stat(filepath.Join(assets, "kube-apiserver")); err != nil {
		return nil, fmt.Errorf("no kube-apiserver in %s: run 'make controlplane' (make test does): %w", assets, err)
	}
	e := &Env{Root: root, env: &envtest.Environment{
		BinaryAssetsDirectory: assets,
		CRDDirectoryPaths:     []string{filepath.Join(root, "config", "crd", "bases")},
		ErrorIfCRDPathMissing: true,
		Scheme:                paasv1.NewScheme(),
	}}
	api := e.env.ControlPlane.GetAPIServer()
	api.Configure().
		Set("service-cluster-ip-range", "10.96.0.0/16,fd00:10:96::/108").
		// Priority and fairness would throttle the benchmarks' deliberate bursts.
		Set("max-requests-inflight", "1000").
		Set("max-mutating-requests-inflight", "500")
	for _, f := range apiServerFlags {
		name, value, _ := strings.Cut(f, "=")
		api.Configure().Set(name, value)
	}
	cfg, err := e.env.Start()
	if err != nil {
		return nil, fmt.Errorf("start control plane: %w", err)
	}
	if e.admin, err = e.env.AddUser(envtest.User{Name: "admin", Groups: []string{"system:masters"}}, cfg); err != nil {
		return nil, e.fail(err)
	}
	e.AdminConfig = e.admin.Config()
	operator, err := e.env.AddUser(envtest.User{Name: OperatorUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + OperatorNamespace}}, cfg)
	if err != nil {
		return nil, e.fail(err)
	}
	e.OperatorConfig = operator.Config()
	e.OperatorConfig.QPS, e.OperatorConfig.Burst = 200, 400
	e.AdminConfig.QPS, e.AdminConfig.Burst = 200, 400
	if e.Admin, err = client.New(e.AdminConfig, client.Options{Scheme: paasv1.NewScheme()}); err != nil {
		return nil, e.fail(err)
	}
	if e.Operator, err = client.New(e.OperatorConfig, client.Options{Scheme: paasv1.NewScheme()}); err != nil {
		return nil, e.fail(err)
	}
	ctx := context.Background()
	ns := &unstructured.Unstructured{}
	ns.SetAPIVersion("v1")
	ns.SetKind("Namespace")
	ns.SetName(OperatorNamespace)
	if err := e.Admin.Create(ctx, ns); err != nil {
		return nil, e.fail(err)
	}
	for _, dir := range []string{"rbac", "admission"} {
		if err := e.ApplyDir(ctx, filepath.Join(root, "config", dir)); err != nil {
			return nil, e.fail(err)
		}
	}
	return e, nil
}

// AgentConfig authenticates as the agent of node: the agents' ServiceAccount
// with the node bound into its identity, as a DaemonSet pod's token binds it
// (impersonated here; test/install uses real Pod-bound tokens).
func (e *Env) AgentConfig(node string) *rest.Config {
	return AsAgent(e.AdminConfig, node)
}

// AsAgent is admin (a config that may impersonate) acting as the agent of node.
func AsAgent(admin *rest.Config, node string) *rest.Config {
	cfg := rest.CopyConfig(admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: AgentUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + OperatorNamespace, "system:authenticated"},
		Extra:  map[string][]string{NodeNameExtra: {node}}}
	return cfg
}

func (e *Env) fail(err error) error {
	return errors.Join(err, e.env.Stop())
}

// AddUser gives the API server another identity (e.g. the agent's ServiceAccount).
func (e *Env) AddUser(u envtest.User, base *rest.Config) (*envtest.AuthenticatedUser, error) {
	return e.env.AddUser(u, base)
}

// Stop stops the control plane.
func (e *Env) Stop() error { return e.env.Stop() }

// KubeconfigFile writes an admin kubeconfig into dir, for kubectl.
func (e *Env) KubeconfigFile(dir string) (string, error) {
	data, err := e.admin.KubeConfig()
	if err != nil {
		return "", err
	}
	path := filepath.Join(dir, "kubeconfig")
	return path, os.WriteFile(path, data, 0o600)
}

// ApplyDir creates, as admin, every object in the YAML files of dir (but its
// kustomization.yaml).
func (e *Env) ApplyDir(ctx context.Context, dir string) error {
	files, err := filepath.Glob(filepath.Join(dir, "*.yaml"))
	if err != nil {
		return err
	}
	for _, f := range files {
		if filepath.Base(f) == "kustomization.yaml" {
			continue
		}
		data, err := os.ReadFile(f)
		if err != nil {
			return err
		}
		if err := e.ApplyYAML(ctx, data); err != nil {
			return fmt.Errorf("%s: %w", f, err)
		}
	}
	return nil
}

// ApplyYAML creates, as admin, every object of a multi-document YAML.
func (e *Env) ApplyYAML(ctx context.Context, data []byte) error {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if len(obj.Object) == 0 {
			continue
		}
		if err := e.Admin.Create(ctx, obj); err != nil {
			return fmt.Errorf("create %s %s: %w", strings.ToLower(obj.GetKind()), obj.GetName(), err)
		}
	}
}

// StatusPolicyBinding binds config/admission/service_status_writers.yaml: while it is in force
// only the operator writes the addresses of the Services it serves.
const StatusPolicyBinding = "vip-allocator-service-status-writers"

// WithoutStatusPolicy lifts StatusPolicyBinding, so that c may write Services' addresses as
// another load balancer (MetalLB) did before this project was installed, and returns what
// puts it back. The API server enforces the removal once its informer has seen it: a write
// right after may still be refused, and is retried by the caller.
func WithoutStatusPolicy(ctx context.Context, c client.Client) (restore func() error, err error) {
	b := &unstructured.Unstructured{}
	b.SetAPIVersion("admissionregistration.k8s.io/v1")
	b.SetKind("ValidatingAdmissionPolicyBinding")
	if err := c.Get(ctx, client.ObjectKey{Name: StatusPolicyBinding}, b); err != nil {
		return nil, fmt.Errorf("get %s: %w", StatusPolicyBinding, err)
	}
	if err := c.Delete(ctx, b); err != nil {
		return nil, fmt.Errorf("delete %s: %w", StatusPolicyBinding, err)
	}
	return func() error {
		again := &unstructured.Unstructured{Object: map[string]any{"apiVersion": b.GetAPIVersion(), "kind": b.GetKind(),
			"metadata": map[string]any{"name": b.GetName()}, "spec": b.Object["spec"]}}
		if err := c.Create(ctx, again); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("restore %s: %w", StatusPolicyBinding, err)
		}
		return nil
	}, nil
}
