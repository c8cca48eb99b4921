//go:build root && envtest

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// frrConfigBFD is frrConfig with BFD (bfdd's profile vipa) on the nodes'
// sessions, IPv4 and IPv6, the three nodes named as static neighbours with
// a fixed source address (other addresses of the LAN still peer through the
// listen range); frrConfigBFDDynamic names none.
func frrConfigBFD(routerID string) string {
	conf := frrConfig(routerID)
	for group, listen := range map[string]string{"nodes": "198.51.100.0/24", "nodes6": "2001:db8:1::/64"} {
		self, nodes := routerID, bgpNodeIP
		if group == "nodes6" {
			self, nodes = "2001:db8:1::"+strings.TrimPrefix(routerID, "198.51.100."), bgpNodeIP6
		}
		neighbors := fmt.Sprintf(" neighbor %s update-source %s\n neighbor %s bfd profile vipa\n", group, self, group)
		for _, n := range []string{"node1", "node2", "node3"} {
			neighbors += fmt.Sprintf(" neighbor %s peer-group %s\n", nodes[n], group)
		}
		conf = strings.Replace(conf, " bgp listen range "+listen+" peer-group "+group+"\n",
			" bgp listen range "+listen+" peer-group "+group+"\n"+neighbors, 1)
	}
	return conf
}

// bfddConfig is the router's BFD profile: 300 ms x 3, as the BGPPeers' default.
const bfddConfig = `bfd
 profile vipa
  receive-interval 300
  transmit-interval 300
  detect-multiplier 3
 exit
exit
`

// bfdPeers maps the router's BFD peers (by address) to their status (up,
// down, init, ...), as 'show bfd peers json' gives them.
func (r *frr) bfdPeers() (map[string]string, error) {
	out, err := r.vtysh("show bfd peers json")
	if err != nil {
		return nil, err
	}
	var peers []struct {
		Peer             string `json:"peer"`
		Status           string `json:"status"`
		ReceiveInterval  int    `json:"receive-interval"`
		TransmitInterval int    `json:"transmit-interval"`
		DetectMultiplier int    `json:"detect-multiplier"`
	}
	if err := json.Unmarshal([]byte(out), &peers); err != nil {
		return nil, fmt.Errorf("parse %q: %w", out, err)
	}
	got := map[string]string{}
	for _, p := range peers {
		got[p.Peer] = p.Status
	}
	return got, nil
}

// waitGone polls the router's table of family (ipv4, ipv6) every 5 ms until
// it holds no route from the node at addr (withdrawn, or its session down),
// and returns how long that took.
func (r *frr) waitGone(t testing.TB, family, addr string, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	for {
		got, err := r.receivedFamily(family)
		if err == nil && got[addr] == 0 {
			return time.Since(start)
		}
		if time.Since(start) > timeout {
			t.Fatalf("router %s still holds %d routes from %s after %s (%v)", r.ns, got[addr], addr, timeout, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestBFD: the BGP lab with bfdd on the router and bfd on the BGPPeer. A hung
// agent and a cut link take the node's routes off the router within BFD's
// detection time (900 ms), far below the hold time (3 s); a drain loses no
// request; a router that stops running BFD keeps the plain sessions, and the
// status says so.
func TestBFD(t *testing.T) {
	d := setupBGPRouter(t, func(l *lab) *frr {
		return startFRRWithBFD(t, l, "router", frrConfigBFD("198.51.100.1"), bfddConfig)
	})
	lab := t
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("router's BFD peers:\n%s", outputOrErr(d.router.vtysh("show bfd peers")))
			b, _ := os.ReadFile(filepath.Join(d.router.dir, "bfdd.log"))
			t.Logf("bfdd.log:\n%s", b)
		}
	})
	ctx := context.Background()
	peer := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "router"},
		Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513, BFD: &paasv1.BFDSettings{}}}
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp-vips"}, Spec: paasv1.IPGroupSpec{
		Segment: "203.0.113.128/25", Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}}
	for _, o := range []client.Object{peer, group} {
		if err := d.env.Admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n)
	}
	web := d.bgpService(t, "web", false)
	webVIP := d.vipOf(t, web)

	t.Run("sessions come up with BFD on both sides", func(t *testing.T) {
		d.peerCondition(t, paasv1.BGPPeerEstablished, metav1.ConditionTrue, "3 of 3 sessions established")
		d.peerCondition(t, paasv1.BGPPeerBFDUp, metav1.ConditionTrue, "BFD is up on 3 of 3 established sessions")
		testenv.Eventually(t, settle, "the router's BFD peers up", func() error {
			got, err := d.router.bfdPeers()
			if err != nil {
				return err
			}
			for _, n := range []string{"node1", "node2", "node3"} {
				if got[bgpNodeIP[n]] != "up" {
					return fmt.Errorf("BFD peers %v: want %s up", got, bgpNodeIP[n])
				}
			}
			return nil
		})
		kc, _ := d.env.KubeconfigFile(t.TempDir())
		kubectl := filepath.Join(d.root, "bin", "k8s", "kubectl")
		testenv.Eventually(t, settle, "every session reports BFD Up", func() error {
			out := d.run(kubectl, "--kubeconfig", kc, "get", "bgppeer", "router", "-o", `jsonpath={.status.sessions[*].bfd}`)
			if out != "Up Up Up" {
				return fmt.Errorf("BFD states: %q", out)
			}
			return nil
		})
		t.Logf("sessions:\n%s", d.run(kubectl, "--kubeconfig", kc, "get", "bgppeer", "router", "-o",
			`jsonpath={range .status.sessions[*]}{.node}{"\t"}{.state}{"\t"}{.bfd}{"\n"}{end}`))
		t.Logf("kubectl get bgppeers -o wide:\n%s", d.run(kubectl, "--kubeconfig", kc, "get", "bgppeers", "-o", "wide"))
		t.Logf("vtysh show bfd peers brief:\n%s", outputOrErr(d.router.vtysh("show bfd peers brief")))
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
	})

	t.Run("a hung agent: the router drops its routes within BFD's detection time", func(t *testing.T) {
		agent := d.agents["node2"].Process
		if err := agent.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		took := d.router.waitGone(t, "ipv4", bgpNodeIP["node2"], 5*time.Second)
		d.waitNextHops(t, webVIP, "node1", "node3")
		t.Logf("node2's agent frozen: its routes gone from the router after %s (BFD 300 ms x 3; hold time 3 s)", took)
		if took > 1500*time.Millisecond {
			t.Errorf("routes gone after %s, want within BFD's detection time (900 ms), well below the hold time (3 s)", took)
		}
		if err := agent.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
		t.Logf("node2's agent resumed: its route back after %s", time.Since(start))
		d.peerCondition(t, paasv1.BGPPeerBFDUp, metav1.ConditionTrue, "3 of 3")
	})

	t.Run("a cut link: the router drops the node's routes within BFD's detection time, takes them back with BFD", func(t *testing.T) {
		d.in("node3", "ip", "link", "set", "eth0", "down")
		took := d.router.waitGone(t, "ipv4", bgpNodeIP["node3"], 5*time.Second)
		d.waitNextHops(t, webVIP, "node1", "node2")
		t.Logf("node3's link cut: its routes gone from the router after %s", took)
		if took > 1500*time.Millisecond {
			t.Errorf("routes gone after %s, want within BFD's detection time (900 ms), well below the hold time (3 s)", took)
		}
		// The agent saw BFD go down on its side too, and said so.
		testenv.Eventually(t, settle, "node3 reports BFD down", func() error {
			var p paasv1.BGPPeer
			if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(peer), &p); err != nil {
				return err
			}
			for _, s := range p.Status.Sessions {
				if s.Node == "node3" && s.BFD == paasv1.BFDDown && s.State != paasv1.SessionEstablished {
					return nil
				}
			}
			return fmt.Errorf("sessions %+v", p.Status.Sessions)
		})
		d.in("node3", "ip", "link", "set", "eth0", "up")
		d.in("node3", "ip", "route", "replace", "default", "via", "198.51.100.1")
		start := time.Now()
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
		t.Logf("node3's link back: its route back after %s", time.Since(start))
		d.peerCondition(t, paasv1.BGPPeerBFDUp, metav1.ConditionTrue, "3 of 3")
	})

	t.Run("drain with BFD on: the node withdraws before its agent stops, no new connection fails", func(t *testing.T) {
		node := d.clientPath(t, webVIP)
		loop := d.curlLoop("http://" + webVIP + "/")
		time.Sleep(500 * time.Millisecond)
		// Whatever this subtest finds, the next ones start from three
		// advertising nodes.
		t.Cleanup(func() {
			d.cordon(t, node, false)
			if d.agents[node] == nil {
				d.startAgent(lab, node)
			}
			d.waitNextHops(t, webVIP, "node1", "node2", "node3")
		})
		move := pathMove{from: time.Now()}
		d.cordon(t, node, true)
		rest := slices.DeleteFunc([]string{"node1", "node2", "node3"}, func(n string) bool { return n == node })
		d.waitNextHops(t, webVIP, rest...)
		move.to = time.Now()
		d.stopAgent(node)                   // the drain evicts the agent last; its BFD session ends with it
		time.Sleep(1500 * time.Millisecond) // past BFD's detection time at the router
		ok, failed := endAcrossMoves(t, loop, move)
		t.Logf("cordoned %s: %d requests, %d failed", node, ok+failed, failed)
	})

	t.Run("a router that stops running BFD keeps the plain sessions, and the status says so", func(t *testing.T) {
		if _, err := d.router.vtysh("configure terminal", "router bgp 64512", "no neighbor nodes bfd"); err != nil {
			t.Fatal(err)
		}
		d.peerCondition(t, paasv1.BGPPeerBFDUp, metav1.ConditionFalse, "BFD is up on 0 of 3 established sessions", "does not run BFD for this node")
		d.peerCondition(t, paasv1.BGPPeerEstablished, metav1.ConditionTrue, "3 of 3 sessions established")
		d.waitNextHops(t, webVIP, "node1", "node2", "node3")
	})
}

// outputOrErr is a command's output, or its error when it failed.
func outputOrErr(s string, err error) string {
	if err != nil {
		return err.Error()
	}
	return s
}
