//go:build root && envtest

package cluster

import (
	"strings"
	"testing"
)

func TestKubeProxyRules(t *testing.T) {
	ruleset := "table ip filter {\n\tchain KUBE-SERVICES {\n\t\tip daddr 10.96.0.1 accept\n\t}\n}\n" +
		"table ip vip-allocator {\n\tmap vips {\n\t\telements = { 192.0.2.192 }\n\t}\n\tchain prerouting {\n\t\tip daddr 192.0.2.193 dnat\n\t}\n}\n" +
		"table ip kube-proxy {\n\tset nodeport-ips {\n\t\telements = { 192.0.2.11 }\n\t}\n}\n"
	got := kubeProxyRules(ruleset)
	for _, want := range []string{"10.96.0.1", "192.0.2.11"} {
		if !strings.Contains(got, want) {
			t.Errorf("kube-proxy's rules miss %s:\n%s", want, got)
		}
	}
	for _, notWant := range []string{"192.0.2.192", "192.0.2.193"} {
		if strings.Contains(got, notWant) {
			t.Errorf("kube-proxy's rules hold the agent's %s:\n%s", notWant, got)
		}
	}
}
