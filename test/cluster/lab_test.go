//go:build root && envtest

// Package cluster runs the operator where users run it: a real three-node
// cluster (hack/cluster.sh: kubelet, containerd, CNI and kube-proxy in network
// namespaces), installed from deploy/bundle.yaml with kubectl, every component
// a pod from the image the nodes imported. Root only; 'make e2e-cluster' and
// 'make test' run every test here, one cluster at a time.
package cluster

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// lab is one cluster: its directory, its kubeconfig and the facts its env file gives.
type lab struct {
	dir, kubeconfig string
	clientNetns     string
	nodeNetns       []string
	lanPool         string
	agnhost         string
	mode            string
}

const operatorNamespace = "vip-allocator-operator"

// fullRun says whether the whole set runs ('make e2e-cluster' sets
// CLUSTER_TESTS=full) or each long test's smoke part only ('make test', within
// CI's time budget). The choice is the target's, never a test's outcome.
func fullRun() bool { return os.Getenv("CLUSTER_TESTS") == "full" }

// upCluster stands a cluster up with kube-proxy in mode and tears it down when
// the test ends, also when it fails (the component logs' tails are printed first).
func upCluster(t *testing.T, mode string) *lab {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Fatal("a cluster needs root (network namespaces, cgroups, containerd): make test runs as root")
	}
	dir, err := os.MkdirTemp("", "vip-cluster-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, dir)
		}
		if out, err := clusterScript(dir, "down", 3*time.Minute); err != nil {
			t.Errorf("cluster.sh down: %v\n%s", err, out)
			return
		}
		_ = os.RemoveAll(dir)
	})
	start := time.Now()
	if out, err := clusterScript(dir, "up", 5*time.Minute, "KUBE_PROXY_MODE="+mode); err != nil {
		t.Fatalf("cluster.sh up: %v\n%s", err, out)
	}
	t.Logf("cluster up in %s (kube-proxy %s)", time.Since(start).Round(time.Second), mode)
	env := readEnv(t, filepath.Join(dir, "env"))
	return &lab{
		dir: dir, kubeconfig: env["KUBECONFIG"], clientNetns: env["CLIENT_NETNS"],
		nodeNetns: strings.Fields(env["NODE_NETNS"]), lanPool: env["LAN_POOL"],
		agnhost: env["AGNHOST_IMAGE"], mode: env["KUBE_PROXY_MODE"],
	}
}

// clusterScript runs hack/cluster.sh CMD DIR within d. Its output goes to a
// file, not a pipe: a process it leaves running must not hold the test.
func clusterScript(dir, cmd string, d time.Duration, env ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	defer cancel()
	out, err := os.CreateTemp("", "cluster-sh-")
	if err != nil {
		return "", err
	}
	defer os.Remove(out.Name())
	defer out.Close()
	c := exec.CommandContext(ctx, filepath.Join(testenv.RepoRoot(), "hack", "cluster.sh"), cmd, dir)
	c.Env = append(os.Environ(), env...)
	c.Stdout, c.Stderr = out, out
	c.WaitDelay = 5 * time.Second
	err = c.Run()
	b, _ := os.ReadFile(out.Name())
	return string(b), err
}

func readEnv(t *testing.T, path string) map[string]string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	env := map[string]string{}
	s := bufio.NewScanner(f)
	for s.Scan() {
		if k, v, ok := strings.Cut(s.Text(), "="); ok {
			env[k] = strings.Trim(v, `"`)
		}
	}
	return env
}

func dumpLogs(t *testing.T, dir string) {
	logs, _ := filepath.Glob(filepath.Join(dir, "run", "*.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		lines := strings.Split(strings.TrimSpace(string(b)), "\n")
		if len(lines) > 15 {
			lines = lines[len(lines)-15:]
		}
		t.Logf("--- %s (tail)\n%s", filepath.Base(l), strings.Join(lines, "\n"))
	}
}

// kubectl runs kubectl as the cluster's admin and fails the test on an error.
func (l *lab) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	out, err := l.tryKubectl(args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

func (l *lab) tryKubectl(args ...string) (string, error) {
	kubectl := filepath.Join(testenv.RepoRoot(), "bin", "k8s", "kubectl")
	cmd := exec.Command(kubectl, append([]string{"--kubeconfig", l.kubeconfig}, args...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err := cmd.Run()
	return strings.TrimSpace(out.String()), err
}

// apply creates or updates the objects of a manifest given inline.
func (l *lab) apply(t *testing.T, manifest string) {
	t.Helper()
	f := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(f, []byte(manifest), 0o644); err != nil {
		t.Fatal(err)
	}
	l.kubectl(t, "apply", "-f", f)
}

// install applies deploy/bundle.yaml as README says and waits until the
// operator's Deployment is available and its agent DaemonSet runs on every node.
// operatorArgs are added to the operator's arguments in the bundle, as a user
// edits them before applying it (e.g. --agent-args=...).
func (l *lab) install(t *testing.T, operatorArgs ...string) {
	t.Helper()
	bundle := filepath.Join(testenv.RepoRoot(), "deploy", "bundle.yaml")
	if len(operatorArgs) > 0 {
		b, err := os.ReadFile(bundle)
		if err != nil {
			t.Fatal(err)
		}
		const args = "      - args:\n        - operator\n"
		if bytes.Count(b, []byte(args)) != 1 {
			t.Fatalf("deploy/bundle.yaml: no single operator container starting with %q", args)
		}
		add := args
		for _, a := range operatorArgs {
			add += "        - " + a + "\n"
		}
		bundle = filepath.Join(t.TempDir(), "bundle.yaml")
		if err := os.WriteFile(bundle, bytes.Replace(b, []byte(args), []byte(add), 1), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	l.kubectl(t, "create", "namespace", operatorNamespace)
	l.kubectl(t, "create", "-f", bundle)
	l.waitInstalled(t)
}

// waitInstalled waits until the operator's Deployment is available and its
// agent DaemonSet runs on every node.
func (l *lab) waitInstalled(t *testing.T) {
	t.Helper()
	l.kubectl(t, "-n", operatorNamespace, "rollout", "status", "deployment/vip-allocator-operator", "--timeout=180s")
	testenv.Eventually(t, 120*time.Second, "the agent DaemonSet", func() error {
		_, err := l.tryKubectl("-n", operatorNamespace, "get", "daemonset/vip-allocator-agent")
		return err
	})
	l.kubectl(t, "-n", operatorNamespace, "rollout", "status", "daemonset/vip-allocator-agent", "--timeout=180s")
}

// inNetns runs a command in one of the lab's network namespaces.
func inNetns(netns string, args ...string) (string, error) {
	out, err := exec.Command("ip", append([]string{"netns", "exec", netns}, args...)...).CombinedOutput()
	return strings.TrimSpace(string(out)), err
}

// fromClient asks url from the client's namespace on the far side of the LAN's router.
func (l *lab) fromClient(url string) (string, error) {
	return inNetns(l.clientNetns, "curl", "-sS", "--max-time", "3", url)
}

// backend deploys agnhost's netexec server (replicas pods) and a LoadBalancer
// Service in front of it, and returns the Service's VIP once it has one.
func (l *lab) backend(t *testing.T, ns, name string, replicas int, policy string) string {
	t.Helper()
	l.apply(t, fmt.Sprintf(`
apiVersion: apps/v1
kind: Deployment
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  replicas: %[3]d
  selector: {matchLabels: {app: %[2]s}}
  template:
    metadata: {labels: {app: %[2]s}}
    spec:
      # Serving on for a while after SIGTERM, as a well-behaved server does,
      # while its endpoint goes from ready to terminating.
      terminationGracePeriodSeconds: 10
      containers:
      - name: netexec
        image: %[4]s
        imagePullPolicy: Never
        args: [netexec, --http-port=8080, --delay-shutdown=5]
        readinessProbe: {httpGet: {path: /healthz, port: 8080}, periodSeconds: 1}
---
apiVersion: v1
kind: Service
metadata: {name: %[2]s, namespace: %[1]s}
spec:
  type: LoadBalancer
  externalTrafficPolicy: %[5]s
  selector: {app: %[2]s}
  ports: [{name: http, port: 80, targetPort: 8080}]
`, ns, name, replicas, l.agnhost, policy))
	l.kubectl(t, "-n", ns, "rollout", "status", "deployment/"+name, "--timeout=120s")
	var vip string
	testenv.Eventually(t, 60*time.Second, "the Service's VIP", func() error {
		vip, _ = l.tryKubectl("-n", ns, "get", "service", name, "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
		if vip == "" {
			return fmt.Errorf("no ingress yet")
		}
		return nil
	})
	return vip
}

// ruleset is what a node's kernel holds for the packet filter, both families
// of nftables and, through iptables-nft, the iptables chains.
func (l *lab) ruleset(t *testing.T, node string) string {
	t.Helper()
	out, err := inNetns(node, "nft", "list", "ruleset")
	if err != nil {
		t.Fatalf("nft list ruleset on %s: %v\n%s", node, err, out)
	}
	return out
}

// noAgentRulesLeft waits until no node's kernel holds a rule, chain or table
// of the agent's: what an uninstall leaves.
func (l *lab) noAgentRulesLeft(t *testing.T) {
	t.Helper()
	testenv.Eventually(t, 60*time.Second, "no agent rules left after the uninstall", func() error {
		for _, node := range l.nodeNetns {
			if rules := l.ruleset(t, node); strings.Contains(rules, "VIPA") || strings.Contains(rules, "vip-allocator") {
				return fmt.Errorf("%s still holds the agent's rules", node)
			}
		}
		return nil
	})
}

// pidOf is the pid of a node's component (kubelet, kube-proxy, containerd)
// as hack/cluster.sh recorded it.
func (l *lab) pidOf(t *testing.T, node, component string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(l.dir, "run", node+"-"+component+".pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("pid file of %s on %s: %v", component, node, err)
	}
	return pid
}

// nodeReady returns nil when the Node's Ready condition has one of the
// statuses in want ("True", or "False|Unknown").
func (l *lab) nodeReady(node, want string) error {
	status, err := l.tryKubectl("get", "node", node, "-o", `jsonpath={.status.conditions[?(@.type=="Ready")].status}`)
	if err != nil {
		return fmt.Errorf("%v: %s", err, status)
	}
	for _, w := range strings.Split(want, "|") {
		if status == w {
			return nil
		}
	}
	return fmt.Errorf("Ready is %q", status)
}

// tagImageEverywhere gives the image every node's containerd holds under
// another name too, as a registry would serve a new release, and returns it.
func (l *lab) tagImageEverywhere(t *testing.T, image, name string) string {
	t.Helper()
	for _, node := range l.nodeNetns {
		holder := strconv.Itoa(l.pidOf(t, node, "mounts"))
		out, err := exec.Command("nsenter", "-t", holder, "-m", "ctr", "-a", "/run/"+node+"/containerd.sock",
			"-n", "k8s.io", "images", "tag", "--force", image, name).CombinedOutput()
		if err != nil {
			t.Fatalf("tag %s as %s on %s: %v\n%s", image, name, node, err, out)
		}
	}
	return name
}

// importImages imports image tarballs (hack/images.sh's docker archives) into
// every node's containerd, as hack/cluster.sh imports the ones every cluster needs.
func (l *lab) importImages(t *testing.T, tars ...string) {
	t.Helper()
	start := time.Now()
	for _, node := range l.nodeNetns {
		holder := strconv.Itoa(l.pidOf(t, node, "mounts"))
		for _, tar := range tars {
			out, err := exec.Command("nsenter", "-t", holder, "-m", "ctr", "-a", "/run/"+node+"/containerd.sock",
				"-n", "k8s.io", "images", "import", tar).CombinedOutput()
			if err != nil {
				t.Fatalf("import %s on %s: %v\n%s", tar, node, err, out)
			}
		}
	}
	t.Logf("%d images imported into %d nodes in %s", len(tars), len(l.nodeNetns), time.Since(start).Round(100*time.Millisecond))
}
