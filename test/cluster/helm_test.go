//go:build root && envtest

package cluster

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

const (
	release = "vip-allocator"
	chart   = "charts/vip-allocator"
)

// helm runs bin/helm ('make helm') against the lab, from the repository root,
// with config and cache directories of its own.
func (l *lab) helm(t *testing.T, args ...string) string {
	t.Helper()
	root := testenv.RepoRoot()
	bin := filepath.Join(root, "bin", "helm")
	if _, err := os.Stat(bin); err != nil {
		t.Fatalf("%s is missing: run 'make helm'", bin)
	}
	cmd := exec.Command(bin, append([]string{"--kubeconfig", l.kubeconfig}, args...)...)
	cmd.Dir = root
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HELM_CONFIG_HOME="+home, "HELM_CACHE_HOME="+home, "HELM_DATA_HOME="+home)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("helm %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

// TestHelm installs the chart where users run it, in each kube-proxy mode
// ('make test' runs nftables, 'make e2e-cluster' both): 'helm install', and a
// LoadBalancer Service answered from the client beyond the LAN's router;
// 'helm upgrade' to a new image tag while the client asks all along (no
// request fails, no VIP moves); the rendered chart applied as a GitOps tool
// applies it, and again after the operator has run, changes nothing;
// 'helm uninstall' leaves no rule of the agent on any node and keeps the CRDs,
// the IPGroup and the ledger, so that installing again gives the Service
// its address back.
func TestHelm(t *testing.T) {
	modes := []string{"nftables"}
	if fullRun() {
		modes = append(modes, "iptables")
	}
	for _, mode := range modes {
		t.Run(mode, func(t *testing.T) { helmLifecycle(t, mode) })
	}
}

func helmLifecycle(t *testing.T, mode string) {
	l := upCluster(t, mode)
	start := time.Now()
	out := l.helm(t, "install", release, chart, "--namespace", operatorNamespace, "--create-namespace", "--wait", "--timeout=5m")
	if !strings.Contains(out, "kind: IPGroup") {
		t.Errorf("the install's notes do not say to create an IPGroup:\n%s", out)
	}
	l.waitInstalled(t)
	t.Logf("helm install: operator and agents ready in %s", time.Since(start).Round(time.Second))
	l.apply(t, fmt.Sprintf("apiVersion: paas.org/v1\nkind: IPGroup\nmetadata: {name: lan}\nspec:\n  segment: %q\n", l.lanPool))
	vip := l.backend(t, "default", "web", 2, "Cluster")
	answered := func(what string) {
		t.Helper()
		testenv.Eventually(t, 60*time.Second, what, func() error {
			hostname, err := l.fromClient("http://" + vip + "/hostname")
			if err == nil && !strings.HasPrefix(hostname, "web-") {
				return fmt.Errorf("the VIP answered %q, not a web pod", hostname)
			}
			return err
		})
	}
	answered("web through its VIP from the client")
	owner := l.owner(t, vip, "")
	t.Logf("web has %s, announced by %s", vip, owner)

	image := l.kubectl(t, "-n", operatorNamespace, "get", "deployment/vip-allocator-operator", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
	i := strings.LastIndex(image, ":")
	if i < 0 || strings.Contains(image[i:], "/") {
		t.Fatalf("the chart's image %q has no tag", image)
	}
	tag := image[i+1:] + "-next"
	t.Run("helm upgrade to a new image tag", func(t *testing.T) {
		next := l.tagImageEverywhere(t, image, image[:i+1]+tag)
		c := l.startClient(vip)
		t0 := time.Now()
		l.helm(t, "upgrade", release, chart, "--namespace", operatorNamespace, "--set", "image.tag="+tag, "--wait", "--timeout=5m")
		testenv.Eventually(t, 120*time.Second, "the agents' DaemonSet on the new image", func() error {
			img, err := l.tryKubectl("-n", operatorNamespace, "get", "daemonset/vip-allocator-agent", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
			if err != nil || img != next {
				return fmt.Errorf("image %q: %v", img, err)
			}
			return nil
		})
		l.kubectl(t, "-n", operatorNamespace, "rollout", "status", "daemonset/vip-allocator-agent", "--timeout=300s")
		took := time.Since(t0)
		time.Sleep(2 * time.Second)
		ok, failed := c.stop()
		t.Logf("helm upgrade to %s: operator and agents rolled in %s; %d requests answered, %d failed", next, took.Round(time.Second), ok, failed)
		if failed > 0 || ok == 0 {
			t.Errorf("%d of %d requests failed during the upgrade:%s", failed, ok+failed, c.failuresSince(t0))
		}
		if now := l.owner(t, vip, ""); now != owner {
			t.Errorf("the upgrade moved %s from %s to %s", vip, owner, now)
		}
	})

	t.Run("the rendered chart applied twice changes nothing", func(t *testing.T) {
		// What Argo CD (ServerSideApply=true) and Flux do with a chart: render
		// it and apply the objects, server-side, at every sync. Nothing the
		// operator writes may be in them, or every sync would undo it.
		rendered := filepath.Join(t.TempDir(), "rendered.yaml")
		if err := os.WriteFile(rendered, []byte(l.helm(t, "template", release, chart, "--namespace", operatorNamespace, "--set", "image.tag="+tag)), 0o644); err != nil {
			t.Fatal(err)
		}
		diff := func(when string) {
			t.Helper()
			out, err := l.tryKubectl("diff", "--server-side", "--field-manager=gitops", "-f", rendered)
			if err != nil || out != "" {
				t.Errorf("kubectl diff %s: %v\n%s", when, err, out)
			}
		}
		diff("of the rendering against what helm installed")
		l.kubectl(t, "apply", "--server-side", "--field-manager=gitops", "-f", rendered)
		// The operator reconciles what it owns (the agents' DaemonSet, its
		// Secret, the namespace's labels, the Service) at its start and on
		// every change; restart it so that it has run after the apply.
		l.kubectl(t, "-n", operatorNamespace, "rollout", "restart", "deployment/vip-allocator-operator")
		l.waitInstalled(t)
		answered("web through its VIP after the sync")
		diff("after a sync and the operator's run")
	})

	t.Run("helm uninstall", func(t *testing.T) {
		l.helm(t, "uninstall", release, "--namespace", operatorNamespace, "--wait", "--timeout=3m")
		testenv.Eventually(t, 60*time.Second, "the agents' DaemonSet deleted with its ServiceAccount", func() error {
			if out, err := l.tryKubectl("-n", operatorNamespace, "get", "daemonset/vip-allocator-agent", "-o", "name"); err == nil {
				return fmt.Errorf("still there: %s", out)
			}
			return nil
		})
		l.noAgentRulesLeft(t)
		// Helm keeps the CRDs (helm.sh/resource-policy: keep), so their objects stay.
		for _, crd := range []string{"bgppeers", "groupsegmentmappings", "ipgroups", "ips", "nodeviews", "virtualips"} {
			l.kubectl(t, "get", "crd", crd+".paas.org")
		}
		l.kubectl(t, "get", "ipgroups.paas.org", "lan")
		if owner := l.kubectl(t, "get", "ips.paas.org", vip, "-o", "jsonpath={.spec.owner.name}"); owner == "" {
			t.Errorf("the ledger object of %s lost its owner", vip)
		}
		if _, err := l.fromClient("http://" + vip + "/hostname"); err == nil {
			t.Errorf("%s still answered with no agent", vip)
		}
	})

	t.Run("helm install again", func(t *testing.T) {
		l.helm(t, "install", release, chart, "--namespace", operatorNamespace, "--wait", "--timeout=5m")
		l.waitInstalled(t)
		answered("web through the same VIP after the new install")
		if got := l.kubectl(t, "get", "service", "web", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}"); got != vip {
			t.Errorf("web has %s after the new install, %s before", got, vip)
		}
	})
}
