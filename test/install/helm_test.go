//go:build envtest

package install

import (
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

const chartDir = "charts/vip-allocator"

// helm runs bin/helm (make helm) from the repository root with its own
// config and cache directories; stdin, when given, is piped in.
func helm(t *testing.T, kubeconfig, stdin string, args ...string) (string, error) {
	t.Helper()
	root := testenv.RepoRoot()
	bin := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run 'make helm' (make verify does)", bin)
	}
	cmd := exec.Command(bin, args...)
	cmd.Dir = root
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	if kubeconfig != "" {
		cmd.Env = append(cmd.Env, "KUBECONFIG="+kubeconfig)
	}
	if stdin != "" {
		cmd.Stdin = strings.NewReader(stdin)
	}
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func mustHelm(t *testing.T, kubeconfig string, args ...string) string {
	t.Helper()
	out, err := helm(t, kubeconfig, "", args...)
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// everyValue sets every value of the chart to something else than its default.
const everyValue = `
image:
  repository: ghcr.io/paas-org/vip-allocator
  tag: "9.9.9"
  digest: ""
  registry: mirror.example:5000
  pullPolicy: IfNotPresent
imagePullSecrets: [{name: regcred}]
crds: {install: true}
ipMode: VIP
ownClassOnly: true
onCordon: keep
serviceCIDRs: [10.96.0.0/12, "fd00:10:96::/112"]
releasedAddressGrace: 10m
metrics: {enabled: true, secure: false}
monitoring: {enabled: false}
operator:
  replicas: 2
  resources: {requests: {cpu: 100m, memory: 128Mi}, limits: {memory: 512Mi}}
  priorityClassName: system-cluster-critical
  nodeSelector: {node-role.kubernetes.io/control-plane: ""}
  tolerations: [{key: node-role.kubernetes.io/control-plane, operator: Exists, effect: NoSchedule}]
  affinity: {podAntiAffinity: {preferredDuringSchedulingIgnoredDuringExecution: [{weight: 1, podAffinityTerm: {topologyKey: kubernetes.io/hostname, labelSelector: {matchLabels: {app.kubernetes.io/name: vip-allocator-operator}}}}]}}
  podAnnotations: {example.com/team: net}
  workers: 16
  kubeAPIQPS: 500
  kubeAPIBurst: 1000
  pprofBindAddress: 127.0.0.1:6060
  migrationWorkers: 4
  migrationCutoverDelay: 10s
  extraArgs: [--leader-election-namespace=lb-system]
agent:
  image: mirror.example:5000/paas-org/vip-allocator:9.9.9-agent
  nodeSelector: {node-role/lb: "true", zone: a}
  tolerations: [{key: role, operator: Equal, value: edge, effect: NoSchedule}]
  dataplane: iptables
  livenessTimers: lan
  memberlistPort: 7947
  masqueradeBit: 14
  onStop: handover
  handoverDelay: 3s
  bgpGracefulShutdown: "0"
  newAddressProbes: 5
  newAddressProbeInterval: 200ms
  connectionHandoff: false
  returnPaths: false
  extraArgs: [--arp-probe-period=30s]
openshift: {scc: false}
`

// everyValueArgs are the operator's arguments everyValue renders.
var everyValueArgs = []string{
	"operator", "--leader-elect",
	"--own-class-only", "--ip-mode=VIP", "--on-cordon=keep", "--service-cidrs=10.96.0.0/12,fd00:10:96::/112",
	"--released-address-grace=10m", "--metrics-secure=false", "--workers=16", "--kube-api-qps=500", "--kube-api-burst=1000",
	"--pprof-bind-address=127.0.0.1:6060", "--migration-workers=4", "--migration-cutover-delay=10s",
	"--agent-image=mirror.example:5000/paas-org/vip-allocator:9.9.9-agent",
	"--agent-node-selector=node-role/lb=true,zone=a",
	`--agent-tolerations=[{"effect":"NoSchedule","key":"role","operator":"Equal","value":"edge"}]`,
	"--agent-args=--own-class-only --metrics-secure=false --dataplane=iptables --liveness-timers=lan --memberlist-port=7947 " +
		"--masquerade-bit=14 --on-stop=handover --handover-delay=3s --bgp-graceful-shutdown=0 --new-address-probes=5 " +
		"--new-address-probe-interval=200ms --connection-handoff=false --return-paths=false --arp-probe-period=30s",
	"--leader-election-namespace=lb-system",
}

func writeValues(t *testing.T, values string) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "values.yaml")
	if err := os.WriteFile(f, []byte(values), 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func operatorDeployment(t *testing.T, objs []*unstructured.Unstructured) *unstructured.Unstructured {
	t.Helper()
	for _, o := range objs {
		if o.GetKind() == "Deployment" && o.GetName() == "vip-allocator-operator" {
			return o
		}
	}
	t.Fatal("no operator Deployment rendered")
	return nil
}

// TestHelmChartValues renders the chart with every value set and checks what
// each becomes: the operator's flags (which the operator, built as the image
// builds it, accepts up to the point where it reads its kubeconfig), the
// image, the Deployment's scheduling, and the release's namespace in every
// object and admission policy.
func TestHelmChartValues(t *testing.T) {
	out := mustHelm(t, "", "template", "vip-allocator", chartDir, "--namespace", "lb-system", "-f", writeValues(t, everyValue))
	objs, err := parseObjects([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	d := operatorDeployment(t, objs)
	c, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
	container := c[0].(map[string]any)
	var args []string
	for _, a := range container["args"].([]any) {
		args = append(args, a.(string))
	}
	if !slices.Equal(args, everyValueArgs) {
		t.Errorf("operator args\n got %q\nwant %q", args, everyValueArgs)
	}
	if img := container["image"]; img != "mirror.example:5000/paas-org/vip-allocator:9.9.9" {
		t.Errorf("image %v", img)
	}
	if p := container["imagePullPolicy"]; p != "IfNotPresent" {
		t.Errorf("imagePullPolicy %v", p)
	}
	pod, _, _ := unstructured.NestedMap(d.Object, "spec", "template", "spec")
	for _, f := range []string{"priorityClassName", "nodeSelector", "tolerations", "affinity"} {
		if pod[f] == nil {
			t.Errorf("pod spec without %s", f)
		}
	}
	if r, _, _ := unstructured.NestedFieldNoCopy(d.Object, "spec", "replicas"); fmt.Sprint(r) != "2" {
		t.Errorf("replicas %v", r)
	}
	if a, _, _ := unstructured.NestedStringMap(d.Object, "spec", "template", "metadata", "annotations"); a["example.com/team"] != "net" {
		t.Errorf("pod annotations %v", a)
	}
	if cpu, _, _ := unstructured.NestedString(container, "resources", "requests", "cpu"); cpu != "100m" {
		t.Errorf("resources %v", container["resources"])
	}
	if strings.Contains(out, "vip-allocator-operator:") || strings.Contains(out, "namespace: vip-allocator-operator") {
		t.Errorf("the bundle's namespace is left in the rendering for namespace lb-system")
	}
	policies := 0
	for _, o := range objs {
		switch o.GetKind() {
		case "ServiceAccount":
			if s, _, _ := unstructured.NestedSlice(o.Object, "imagePullSecrets"); len(s) != 1 {
				t.Errorf("ServiceAccount %s: imagePullSecrets %v", o.GetName(), s)
			}
		case "ValidatingAdmissionPolicy":
			if strings.Contains(toYAML(t, o), "system:serviceaccount:lb-system:vip-allocator-") {
				policies++
			}
		}
		if o.GetNamespace() != "" && o.GetNamespace() != "lb-system" {
			t.Errorf("%s in namespace %s", ref(o), o.GetNamespace())
		}
		if o.GetLabels()["app.kubernetes.io/managed-by"] != "Helm" || o.GetLabels()["app.kubernetes.io/instance"] != "vip-allocator" {
			t.Errorf("%s without the chart's labels: %v", ref(o), o.GetLabels())
		}
	}

	if policies < 8 {
		t.Errorf("%d admission policies name the ServiceAccounts of lb-system", policies)
	}

	// The operator parses and checks its flags (--agent-args as the agents
	// will) before it reads its kubeconfig: one that is missing is the first
	// error it meets when every flag is right.
	bin := filepath.Join(t.TempDir(), "vip-allocator")
	buildStatic(t, bin)
	missing := filepath.Join(t.TempDir(), "no-kubeconfig")
	run := exec.Command(bin, append(slices.Clone(args), "--kubeconfig="+missing)...)
	b, err := run.CombinedOutput()
	if err == nil || !strings.Contains(string(b), missing) {
		t.Fatalf("the operator refused the chart's flags (or started): %v\n%s", err, b)
	}
}

// TestHelmChartSchema: values the operator or the agents would refuse are
// refused by 'helm template' with a message that names the value.
func TestHelmChartSchema(t *testing.T) {
	for _, tc := range []struct {
		set  []string
		want []string
	}{
		{[]string{"ipMode=Bogus"}, []string{"/ipMode", "'Proxy', 'VIP'"}},
		{[]string{"agent.dataplane=ebpf"}, []string{"/agent/dataplane", "'auto', 'nftables', 'iptables'"}},
		{[]string{"onCordon=drain"}, []string{"/onCordon", "'handover', 'keep'"}},
		{[]string{"serviceCIDRs={10.96.0.0/33}"}, []string{"/serviceCIDRs/0"}},
		{[]string{"releasedAddressGrace=ten minutes"}, []string{"/releasedAddressGrace"}},
		{[]string{"agent.memberlistPort=70000"}, []string{"/agent/memberlistPort", "maximum"}},
		{[]string{"agent.extraArgs={--arp-probe-period=30s --x}"}, []string{"/agent/extraArgs/0"}},
		{[]string{"operator.extraArgs={workers=3}"}, []string{"/operator/extraArgs/0"}},
		{[]string{"operator.workers=0"}, []string{"/operator/workers"}},
		{[]string{"image.digest=sha256:beef"}, []string{"/image/digest"}},
		{[]string{"agent.tolerations[0].operator=Maybe"}, []string{"/agent/tolerations/0/operator"}},
		{[]string{"ipmode=VIP"}, []string{"ipmode"}},
		{[]string{"monitoring.enabled=true", "metrics.enabled=false"}, []string{"monitoring.enabled needs metrics.enabled"}},
		{[]string{"image.tag="}, []string{"image.tag or image.digest must be set"}},
	} {
		args := []string{"template", "vip-allocator", chartDir, "--namespace", "vip-allocator-operator"}
		for _, s := range tc.set {
			args = append(args, "--set", s)
		}
		out, err := helm(t, "", "", args...)
		if err == nil {
			t.Errorf("--set %v: rendered", tc.set)
			continue
		}
		for _, w := range tc.want {
			if !strings.Contains(out, w) {
				t.Errorf("--set %v: the refusal does not say %q:\n%s", tc.set, w, out)
			}
		}
	}
}

// TestHelmChartOnAPIServer: 'helm lint' is clean; the chart's rendering, with
// its defaults and with every value set, passes the API server's own checks
// (kubectl apply --dry-run=server); 'helm install' into another namespace
// than the bundle's puts the admission policies in force for that namespace's
// ServiceAccounts, and its operator may write none of them; 'helm uninstall'
// removes everything but the CRDs and what they hold.
func TestHelmChartOnAPIServer(t *testing.T) {
	for _, values := range []string{"", everyValue} {
		args := []string{"lint", "--strict", chartDir}
		if values != "" {
			args = append(args, "-f", writeValues(t, values))
		}
		if out := mustHelm(t, "", args...); !strings.Contains(out, "0 chart(s) failed") {
			t.Fatalf("helm lint: %s", out)
		}
	}
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	c := startCluster(t)

	for _, tc := range []struct{ ns, values string }{{namespace, ""}, {"lb-system", everyValue}} {
		c.mustKubectl(t, "create", "namespace", tc.ns)
		args := []string{"template", "vip-allocator", chartDir, "--namespace", tc.ns}
		if tc.values != "" {
			args = append(args, "-f", writeValues(t, tc.values))
		}
		rendered := mustHelm(t, "", args...)
		objs, err := parseObjects([]byte(rendered))
		if err != nil {
			t.Fatal(err)
		}
		out, err := c.kubectl(rendered, "apply", "--server-side", "--dry-run=server", "-f", "-")
		if err != nil {
			t.Fatalf("namespace %s: %v", tc.ns, err)
		}
		if n := strings.Count(out, "serverside-applied (server dry run)"); n != len(objs) {
			t.Fatalf("namespace %s: %d of %d objects accepted:\n%s", tc.ns, n, len(objs), out)
		}
	}

	const ns = "lb-system"
	out := mustHelm(t, c.kubeconfig, "install", "vip-allocator", chartDir, "--namespace", ns, "-f", writeValues(t, everyValue))
	if !strings.Contains(out, "STATUS: deployed") || !strings.Contains(out, "kind: IPGroup") {
		t.Fatalf("helm install: no deployed release, or NOTES.txt without the IPGroup to create next:\n%s", out)
	}
	for _, crd := range []string{"ipgroups.paas.org", "ips.paas.org"} {
		c.mustKubectl(t, "wait", "--for", "condition=Established", "--timeout", "60s", "crd/"+crd)
	}
	c.mustKubectl(t, "create", "clusterrole", "jane", "--verb=create,delete", "--resource=virtualips.paas.org,ips.paas.org")
	c.mustKubectl(t, "create", "clusterrolebinding", "jane", "--clusterrole=jane", "--user=jane")
	c.onlyOperatorWritesLedger(t, "system:serviceaccount:"+ns+":vip-allocator-operator")
	admin, err := client.New(c.admin, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	operatorMayNotWritePolicies(t, admin, "system:serviceaccount:"+ns+":vip-allocator-operator", ns,
		readObjects(t, "deploy/admission-policies.yaml"), false)
	c.mustKubectl(t, "create", "-f", "config/samples/ipgroup.yaml")
	c.waitListable(t, "deploy/bundle.yaml")

	mustHelm(t, c.kubeconfig, "uninstall", "vip-allocator", "--namespace", ns, "--wait", "--timeout=3m")
	for _, o := range readObjects(t, "deploy/bundle.yaml") {
		_, err := c.kubectl("", "get", "-n", ns, ref(o))
		if kept := err == nil; kept != (o.GetKind() == "CustomResourceDefinition") {
			t.Errorf("%s after helm uninstall: kept %v", ref(o), kept)
		}
	}
	c.mustKubectl(t, "get", "ipgroup.paas.org/192.0.2.0-24", "ip.paas.org/192.0.2.9")
}

func toYAML(t *testing.T, o *unstructured.Unstructured) string {
	t.Helper()
	b, err := o.MarshalJSON()
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
