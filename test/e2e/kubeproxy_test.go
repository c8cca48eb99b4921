//go:build root && envtest

package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// kubeProxies are real kube-proxies (bin/k8s/kube-proxy, built from the Kubernetes module), one
// in each of some lab nodes, in their default iptables mode: what forwards a LoadBalancer
// address on a cluster where MetalLB only announces it. kube-proxy leaves an address alone
// whose status says ipMode Proxy, as the operator writes it: from the adoption on, the agents'
// rules carry it.
type kubeProxies struct {
	procs []*nodeProcess
}

// startKubeProxies runs kube-proxy in each of nodes, as the node (--hostname-override: its Node
// object gives the node's address), and waits until each has a rule for the LoadBalancer
// address vip.
func startKubeProxies(t *testing.T, d *dataLab, vip string, nodes ...string) *kubeProxies {
	t.Helper()
	bin := filepath.Join(d.root, "bin", "k8s", "kube-proxy")
	if _, err := os.Stat(bin); err != nil {
		t.Fatal("bin/k8s/kube-proxy is missing: run 'make controlplane'")
	}
	kubeconfig := writeKubeconfig(t, d.env.AdminConfig, "https://127.0.0.1:6443")
	k := &kubeProxies{}
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range k.procs {
				t.Log(p.tail(40))
			}
		}
	})
	for _, n := range nodes {
		k.procs = append(k.procs, startInNode(t, d, n, "kube-proxy", nil, bin,
			"--kubeconfig", kubeconfig, "--proxy-mode", "iptables", "--hostname-override", n,
			// The namespace is no whole node: leave the host's conntrack table size alone.
			"--conntrack-max-per-core", "0",
			"--metrics-bind-address", "127.0.0.1:10249", "--healthz-bind-address", "127.0.0.1:10256"))
	}
	k.wait(t, d, vip, true)
	return k
}

// wait waits until each kube-proxy has a rule for the LoadBalancer address vip, or none.
func (k *kubeProxies) wait(t *testing.T, d *dataLab, vip string, want bool) {
	t.Helper()
	for _, p := range k.procs {
		testenv.Eventually(t, settle, fmt.Sprintf("kube-proxy on %s has a rule for %s: %t", p.node, vip, want), func() error {
			if err := p.exited(); err != nil {
				t.Fatal(err)
			}
			save := "iptables-save"
			if strings.Contains(vip, ":") {
				save = "ip6tables-save"
			}
			if got := hasLoadBalancerRule(d.in(p.node, save, "-t", "nat"), vip); got != want {
				return fmt.Errorf("%s's nat table has a rule for %s: %t", p.node, vip, got)
			}
			return nil
		})
	}
}

// hasLoadBalancerRule reports whether an iptables-save (ip6tables-save) dump holds kube-proxy's
// rule for the LoadBalancer address vip (kube-proxy comments it "<service>:<port> loadbalancer IP").
func hasLoadBalancerRule(dump, vip string) bool {
	for _, line := range strings.Split(dump, "\n") {
		if strings.Contains(line, "-d "+hostRoute(vip)) && strings.Contains(line, "loadbalancer IP") {
			return true
		}
	}
	return false
}
