package nodeagent

import (
	"fmt"
	"net"
	"strconv"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// MetricsBindAddress is where the agent serves its metrics (and /debug/vips):
// flag when set ("0": nowhere); else the node's first InternalIP, on
// paasv1.AgentMetricsPort. The agent runs in the host's network, so a port on
// every address would be open on every network the node is on, the VIPs'
// LANs and any public one included; the InternalIP is the address the
// cluster (Prometheus, explain) reaches the node at.
func MetricsBindAddress(flag string, node *corev1.Node) (string, error) {
	if flag != "" {
		return flag, nil
	}
	ips := election.InternalIPs(node)
	if len(ips) == 0 {
		return "", fmt.Errorf("node %s lists no InternalIP to serve metrics on: set --metrics-bind-address (0 disables them)", node.Name)
	}
	return net.JoinHostPort(ips[0].String(), strconv.Itoa(paasv1.AgentMetricsPort)), nil
}
