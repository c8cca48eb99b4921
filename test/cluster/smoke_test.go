//go:build root && envtest

package cluster

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestSmoke installs the bundle on a fresh cluster in each kube-proxy mode and
// reaches a LoadBalancer Service from the client beyond the LAN's router: the
// image under containerd, the operator as a Deployment creating the agent
// DaemonSet, the agent pods with their Pod-bound tokens, ARP answered on the
// LAN, the VIP DNATed by the agent's rules beside kube-proxy's and left alone
// by kube-proxy (ipMode Proxy), and 'kubectl vip explain' reading each
// node's kernel through the API server's pods/proxy. Then the Service is deleted (the operator
// drops its cleanup finalizer) and 'kubectl delete -f deploy/bundle.yaml'
// leaves no rule of the agent on any node.
func TestSmoke(t *testing.T) {
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) {
			l := upCluster(t, mode)
			l.install(t)
			l.apply(t, fmt.Sprintf(`
apiVersion: paas.org/v1
kind: IPGroup
metadata: {name: lan}
spec:
  segment: %q
`, l.lanPool))
			vip := l.backend(t, "default", "web", 2, "Cluster")
			t.Logf("web has %s", vip)

			var hostname string
			testenv.Eventually(t, 60*time.Second, "web through its VIP from the client", func() (err error) {
				hostname, err = l.fromClient("http://" + vip + "/hostname")
				return err
			})
			if !strings.HasPrefix(hostname, "web-") {
				t.Fatalf("the VIP answered %q, not a web pod", hostname)
			}
			l.explainHealthy(t, "default", "web")

			for _, node := range l.nodeNetns {
				rules := l.ruleset(t, node)
				if !strings.Contains(rules, vip) {
					t.Errorf("%s: the agent's rules do not hold %s", node, vip)
				}
				if kp := kubeProxyRules(rules); strings.Contains(kp, vip) {
					t.Errorf("%s: kube-proxy (%s mode) programs %s, which ipMode Proxy leaves to the agent:\n%s", node, mode, vip, kp)
				}
			}

			// The operator holds the Service by its cleanup finalizer until the
			// address is released; the uninstall comes after.
			l.kubectl(t, "delete", "service", "web", "--wait=true", "--timeout=60s")
			// With its last address released, the group loses the finalizer
			// that protects held addresses: the uninstall, which takes the
			// operator away, then finds nothing left to let go of.
			testenv.Eventually(t, 30*time.Second, "IPGroup lan without the addresses-held finalizer", func() error {
				if f := l.kubectl(t, "get", "ipgroups.paas.org", "lan", "-o", "jsonpath={.metadata.finalizers}"); f != "" {
					return fmt.Errorf("finalizers %s", f)
				}
				return nil
			})
			l.kubectl(t, "delete", "-f", "../../deploy/bundle.yaml", "--wait=true", "--timeout=120s")
			l.noAgentRulesLeft(t)
		})
	}
}

// kubeProxyRules is the part of a node's ruleset kube-proxy wrote: the chains
// of its nftables table (nftables mode) and its KUBE- chains (iptables mode,
// written through iptables-nft).
func kubeProxyRules(ruleset string) string {
	var b strings.Builder
	table, chain := "", ""
	for _, line := range strings.Split(ruleset, "\n") {
		switch {
		case strings.HasPrefix(line, "table "):
			table, chain = line, ""
		case strings.HasPrefix(line, "\tchain "):
			chain = strings.TrimPrefix(line, "\tchain ")
		case strings.HasPrefix(line, "\tset "), strings.HasPrefix(line, "\tmap "):
			chain = "" // a table's sets and maps are not its chains
		}
		if strings.Contains(table, " kube-proxy ") || strings.HasPrefix(chain, "KUBE-") {
			b.WriteString(line)
			b.WriteByte('\n')
		}
	}
	return b.String()
}
