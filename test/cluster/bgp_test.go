//go:build root && envtest

package cluster

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestBGP announces a routed pool from the agent pods to the LAN's FRR router,
// kube-proxy in iptables mode: every node advertises a Cluster Service's VIP,
// the router's kernel holds one route with a next hop per node (ECMP), the
// client beyond the router reaches the VIP, and an agent container killed on
// one node costs no request (its session drops, the router sends the others'
// way, the restarted agent advertises again).
func TestBGP(t *testing.T) {
	l := upCluster(t, "iptables")
	env := readEnv(t, filepath.Join(l.dir, "env"))
	l.install(t)
	l.apply(t, fmt.Sprintf(`
apiVersion: paas.org/v1
kind: BGPPeer
metadata: {name: lab-router}
spec: {peerAddress: %q, peerASN: %s, myASN: %s}
---
apiVersion: paas.org/v1
kind: IPGroup
metadata: {name: routed}
spec:
  segment: %q
  announce: {mode: BGP}
`, env["ROUTER_IP"], env["ROUTER_ASN"], env["NODE_ASN"], env["BGP_POOL"]))
	vip := l.backend(t, "default", "web", 3, "Cluster")
	router := env["ROUTER_NETNS"]

	testenv.Eventually(t, 60*time.Second, "a route to "+vip+" over every node", func() error {
		if hops := nextHops(router, vip); len(hops) != len(l.nodeNetns) {
			return fmt.Errorf("next hops %v", hops)
		}
		return nil
	})
	testenv.Eventually(t, 30*time.Second, "web through its VIP from the client", func() error {
		_, err := l.fromClient("http://" + vip + "/hostname")
		return err
	})

	node := l.nodeNetns[0]
	c := l.startClient(vip)
	pid := agentPID(t, node)
	if out, err := inNetns(node, "kill", "-9", pid); err != nil {
		t.Fatalf("kill %s: %v %s", pid, err, out)
	}
	testenv.Eventually(t, 60*time.Second, "the agent restarted by the kubelet", func() error {
		if p, err := findAgentPID(node); err != nil || p == pid {
			return fmt.Errorf("agent pid %q (killed %s): %v", p, pid, err)
		}
		return nil
	})
	testenv.Eventually(t, 60*time.Second, "the route over every node again", func() error {
		if hops := nextHops(router, vip); len(hops) != len(l.nodeNetns) {
			return fmt.Errorf("next hops %v", hops)
		}
		return nil
	})
	time.Sleep(2 * time.Second)
	ok, failed := c.stop()
	t.Logf("%s routed over %v; %d requests answered, %d failed while %s's agent restarted", vip, nextHops(router, vip), ok, failed, node)
	if failed > 0 || ok == 0 {
		t.Errorf("%d of %d requests failed while an agent restarted", failed, ok+failed)
	}
}

// nextHops are the gateways of the router's kernel route to vip.
func nextHops(router, vip string) []string {
	out, err := inNetns(router, "ip", "route", "show", vip+"/32")
	if err != nil {
		return nil
	}
	var hops []string
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		for i := 0; i+1 < len(f); i++ {
			if f[i] == "via" {
				hops = append(hops, f[i+1])
			}
		}
	}
	return hops
}
