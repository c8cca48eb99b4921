//go:build root && envtest

package cluster

import (
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestFailover takes the VIP's owner away in the ways a node goes on a real
// cluster, in each kube-proxy mode, with a client asking the VIP all along
// from beyond the router:
//   - its agent container is killed (SIGKILL): the kernel keeps the agent's
//     rules and the kubelet restarts the container, so no request fails;
//   - its kubelet hangs until the Node is NotReady: no request fails;
//   - a new operator image rolls the agents: no request fails, no VIP moves;
//   - it is drained: the VIP moves, an open connection goes on, no request fails;
//   - its link to the LAN goes down (a dead node): another node answers ARP
//     for the VIP within the failover bound.
func TestFailover(t *testing.T) {
	for _, mode := range []string{"nftables", "iptables"} {
		t.Run(mode, func(t *testing.T) { failover(t, mode) })
	}
}

func failover(t *testing.T, mode string) {
	l := upCluster(t, mode)
	l.install(t)
	l.apply(t, fmt.Sprintf("apiVersion: paas.org/v1\nkind: IPGroup\nmetadata: {name: lan}\nspec:\n  segment: %q\n", l.lanPool))
	vip := l.backend(t, "default", "web", 3, "Cluster")
	owner := l.owner(t, vip, "")

	t.Run("the owner's agent container is killed", func(t *testing.T) {
		c := l.startClient(vip)
		pid := agentPID(t, owner)
		if out, err := inNetns(owner, "kill", "-9", pid); err != nil {
			t.Fatalf("kill %s: %v %s", pid, err, out)
		}
		testenv.Eventually(t, 60*time.Second, "the agent restarted by the kubelet", func() error {
			if p, err := findAgentPID(owner); err != nil || p == pid {
				return fmt.Errorf("agent pid %q (killed %s): %v", p, pid, err)
			}
			return nil
		})
		time.Sleep(2 * time.Second)
		ok, failed := c.stop()
		t.Logf("%d requests answered, %d failed while the agent restarted", ok, failed)
		if failed > 0 || ok == 0 {
			t.Errorf("%d of %d requests failed while the owner's agent restarted", failed, ok+failed)
		}
	})

	t.Run("the owner's kubelet stops", func(t *testing.T) {
		// A hung kubelet (frozen by SIGSTOP): the Node goes NotReady and its
		// pods' endpoints not ready, while the agent and the pods run on. No
		// request may fail: nothing the node still does is wrong.
		c := l.startClient(vip)
		kubelet := l.pidOf(t, owner, "kubelet")
		if err := syscall.Kill(kubelet, syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		resumed := false
		resume := func() {
			if !resumed {
				resumed = true
				_ = syscall.Kill(kubelet, syscall.SIGCONT)
			}
		}
		defer resume()
		testenv.Eventually(t, 120*time.Second, owner+" NotReady", func() error { return l.nodeReady(owner, "False|Unknown") })
		time.Sleep(5 * time.Second)
		resume()
		testenv.Eventually(t, 60*time.Second, owner+" Ready again", func() error { return l.nodeReady(owner, "True") })
		ok, failed := c.stop()
		t.Logf("%d requests answered, %d failed while %s's kubelet was stopped and the Node NotReady", ok, failed, owner)
		if failed > 0 || ok == 0 {
			t.Errorf("%d of %d requests failed while the owner's kubelet was stopped", failed, ok+failed)
		}
	})

	t.Run("the operator's image is upgraded", func(t *testing.T) {
		// A new operator image rolls the agent DaemonSet one node at a time:
		// each agent restarts on its node, the kernel keeps its rules, and no
		// VIP moves.
		image := l.kubectl(t, "-n", operatorNamespace, "get", "deployment/vip-allocator-operator", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
		next := l.tagImageEverywhere(t, image, image+"-next")
		c := l.startClient(vip)
		l.kubectl(t, "-n", operatorNamespace, "set", "image", "deployment/vip-allocator-operator", "operator="+next)
		l.kubectl(t, "-n", operatorNamespace, "rollout", "status", "deployment/vip-allocator-operator", "--timeout=180s")
		testenv.Eventually(t, 120*time.Second, "the agents' DaemonSet on the new image", func() error {
			img, err := l.tryKubectl("-n", operatorNamespace, "get", "daemonset/vip-allocator-agent", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
			if err != nil || img != next {
				return fmt.Errorf("image %q: %v", img, err)
			}
			return nil
		})
		l.kubectl(t, "-n", operatorNamespace, "rollout", "status", "daemonset/vip-allocator-agent", "--timeout=300s")
		time.Sleep(2 * time.Second)
		ok, failed := c.stop()
		t.Logf("%d requests answered, %d failed while the agents rolled to %s", ok, failed, next)
		if failed > 0 || ok == 0 {
			t.Errorf("%d of %d requests failed during the upgrade", failed, ok+failed)
		}
		if now := l.owner(t, vip, ""); now != owner {
			t.Errorf("the upgrade moved %s from %s to %s", vip, owner, now)
		}
	})

	t.Run("the owner is drained with a connection open", func(t *testing.T) {
		// kubectl drain cordons the owner (its VIPs move, a planned move) and
		// evicts its pods. A keep-alive connection to a pod on another node
		// goes on through the move, and new connections never fail.
		conn := l.keepAlive(t, vip, func(node string) bool { return node != owner })
		defer conn.Close()
		c := l.startClient(vip)
		stream := conn.askEvery(100 * time.Millisecond)
		l.kubectl(t, "drain", owner, "--ignore-daemonsets", "--delete-emptydir-data", "--timeout=120s")
		next := l.owner(t, vip, owner)
		time.Sleep(3 * time.Second)
		answered, broken := stream.stop()
		ok, failed := c.stop()
		l.kubectl(t, "uncordon", owner)
		t.Logf("%s drained, %s took %s over; the open connection: %d answers, broken: %v; new connections: %d answered, %d failed",
			owner, next, vip, answered, broken, ok, failed)
		if broken != nil {
			t.Errorf("the open connection broke across the drain after %d answers: %v", answered, broken)
		}
		if failed > 0 || ok == 0 {
			t.Errorf("%d of %d new connections failed across the drain", failed, ok+failed)
		}
		owner = next
	})

	t.Run("the owner's link goes down", func(t *testing.T) {
		c := l.startClient(vip)
		down := time.Now()
		if out, err := inNetns(owner, "ip", "link", "set", "eth0", "down"); err != nil {
			t.Fatalf("link down: %v %s", err, out)
		}
		next := l.owner(t, vip, owner)
		moved := time.Since(down)
		time.Sleep(3 * time.Second)
		ok, failed := c.stop()
		gap := time.Duration(c.maxGap.Load())
		t.Logf("%s took %s over from %s within %s; the longest wait between two answers was %s (%d answered, %d failed)",
			next, vip, owner, moved.Round(time.Millisecond), gap.Round(time.Millisecond), ok, failed)
		if gap > 5*time.Second {
			t.Errorf("the client waited %s between two answers across the failover", gap)
		}
	})
}

// owner waits until the ledger names a node announcing vip other than not, and
// returns that node's network namespace.
func (l *lab) owner(t *testing.T, vip, not string) string {
	t.Helper()
	var ns string
	testenv.Eventually(t, 60*time.Second, "an owner of "+vip, func() error {
		// By its group: kubectl takes the short name "ip" for
		// networking.k8s.io's IPAddress.
		out, err := l.tryKubectl("get", "ips.paas.org", vip, "-o", "jsonpath={.status.announcedBy[*]}")
		if err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		for _, node := range strings.Fields(out) {
			if node != not {
				ns = node // the nodes are named after their namespaces
				return nil
			}
		}
		return fmt.Errorf("announced by %q", out)
	})
	return ns
}

// agentPID is the pid of the agent process in the node's network namespace.
func agentPID(t *testing.T, node string) string {
	t.Helper()
	pid, err := findAgentPID(node)
	if err != nil {
		t.Fatal(err)
	}
	return pid
}

func findAgentPID(node string) (string, error) {
	out, err := inNetns(node, "ip", "netns", "pids", node)
	if err != nil {
		return "", fmt.Errorf("pids of %s: %v %s", node, err, out)
	}
	for _, pid := range strings.Fields(out) {
		cmdline, _ := inNetns(node, "cat", "/proc/"+pid+"/cmdline")
		if strings.Contains(cmdline, "vip-allocator") && strings.Contains(cmdline, "agent") {
			return pid, nil
		}
	}
	return "", fmt.Errorf("no agent process in %s", node)
}

// client asks the VIP from the client's namespace, one request after another,
// and counts the answers.
type client struct {
	ok, failed atomic.Int64
	maxGap     atomic.Int64 // the longest time between two answers, in nanoseconds
	done       chan struct{}
	wg         sync.WaitGroup

	mu       sync.Mutex
	failures []failure // when each request failed, and how
}

type failure struct {
	at  time.Time
	err string
}

// failuresSince lists the failed requests, each at its time after t0 with
// curl's error.
func (c *client) failuresSince(t0 time.Time) string {
	c.mu.Lock()
	defer c.mu.Unlock()
	var b strings.Builder
	for _, f := range c.failures {
		fmt.Fprintf(&b, "\n  +%s: %s", f.at.Sub(t0).Round(time.Millisecond), f.err)
	}
	return b.String()
}

func (l *lab) startClient(vip string) *client {
	c := &client{done: make(chan struct{})}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		last := time.Now()
		for {
			select {
			case <-c.done:
				return
			default:
			}
			if out, err := inNetns(l.clientNetns, "curl", "-sS", "--max-time", "1", "http://"+vip+"/hostname"); err != nil {
				c.failed.Add(1)
				c.mu.Lock()
				c.failures = append(c.failures, failure{time.Now(), fmt.Sprintf("%v: %s", err, out)})
				c.mu.Unlock()
				continue
			}
			c.ok.Add(1)
			if gap := time.Since(last); int64(gap) > c.maxGap.Load() {
				c.maxGap.Store(int64(gap))
			}
			last = time.Now()
			time.Sleep(50 * time.Millisecond)
		}
	}()
	return c
}

func (c *client) stop() (ok, failed int64) {
	close(c.done)
	c.wg.Wait()
	return c.ok.Load(), c.failed.Load()
}
