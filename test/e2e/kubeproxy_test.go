package e2e

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
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
	for _, p := range k.procs {
		eventually(t, "kube-proxy on "+p.node+" has a rule for "+vip, func() error {
			if err := p.exited(); err != nil {
				t.Fatal(err)
			}
			if rules := d.in(p.node, "iptables-save", "-t", "nat"); !strings.Contains(rules, "-d "+vip+"/32") {
				return fmt.Errorf("no rule for %s in %s's nat table", vip, p.node)
			}
			return nil
		})
	}
	return k
}
