//go:build root && envtest

package cluster

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// The agents' gossip port beside MetalLB's speakers, which gossip on 7946 (the
// agents' default too) as MetalLB's manifest runs them: the operator's
// --agent-args moves the agents', as docs/migration.md says.
const agentMemberlistPortBesideMetalLB = "7947"

// TestMetalLBSwitch is the switch from MetalLB on a real cluster, as a user
// makes it: MetalLB v0.16.1 installed from its own native-mode manifest,
// unchanged (its controller and speaker images built from the pinned module,
// hack/images.sh), serving a LoadBalancer Service whose pods answer a client
// beyond the LAN's router; then the bundle installed beside it with the
// agents' gossip off MetalLB's port, 'vip-allocator migrate metallb plan' and
// 'apply --scale-down-controller' (the real CLI), and MetalLB deleted with
// 'kubectl delete -f' of the same manifest. The client asks the VIP all
// along: not one request may fail, the Service keeps its address, and at the
// end the agents alone carry the VIP (the router's ARP entry is the owner
// node's, no MetalLB process is left).
//
// 'make test' runs L2 with kube-proxy in nftables mode (about 3 minutes);
// 'make e2e-cluster' (CLUSTER_TESTS=full) adds L2 in iptables mode and BGP
// with the LAN's FRR router.
func TestMetalLBSwitch(t *testing.T) {
	for _, tc := range []struct {
		name, mode string
		bgp, smoke bool
	}{
		{"L2/nftables", "nftables", false, true},
		{"L2/iptables", "iptables", false, false},
		{"BGP/iptables", "iptables", true, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if !tc.smoke && !fullRun() {
				t.Skip("part of the full set only: make e2e-cluster (CLUSTER_TESTS=full)")
			}
			metallbSwitch(t, tc.mode, tc.bgp)
		})
	}
}

func metallbSwitch(t *testing.T, mode string, bgp bool) {
	manifest, images := metallbManifest(t)
	l := upCluster(t, mode)
	l.importImages(t, images...)
	env := readEnv(t, filepath.Join(l.dir, "env"))
	router := env["ROUTER_NETNS"]

	// MetalLB's time: its manifest as published, then its configuration once
	// its controller (which serves the webhooks that check it) is ready.
	start := time.Now()
	l.kubectl(t, "apply", "-f", manifest)
	l.kubectl(t, "-n", "metallb-system", "rollout", "status", "deployment/controller", "--timeout=180s")
	l.kubectl(t, "-n", "metallb-system", "rollout", "status", "daemonset/speaker", "--timeout=180s")
	config, metallbHops := metallbConfig(t, l, env, bgp)
	f := filepath.Join(t.TempDir(), "metallb-config.yaml")
	if err := os.WriteFile(f, []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, 90*time.Second, "MetalLB's configuration accepted by its webhooks", func() error {
		if out, err := l.tryKubectl("apply", "-f", f); err != nil {
			return fmt.Errorf("%v: %s", err, out)
		}
		return nil
	})
	vip := l.backend(t, "default", "web", 3, "Cluster")
	if bgp {
		testenv.Eventually(t, 90*time.Second, "the router routes "+vip+" to MetalLB's speakers", func() error {
			if hops := sorted(nextHops(router, vip)); !slices.Equal(hops, metallbHops) {
				return fmt.Errorf("next hops %v, want %v", hops, metallbHops)
			}
			return nil
		})
	}
	testenv.Eventually(t, 90*time.Second, "web through MetalLB's "+vip+" from the client", func() error {
		_, err := l.fromClient("http://" + vip + "/hostname")
		return err
	})
	metallbNode := "" // L2: the node MetalLB's speaker answers ARP from
	if bgp {
		t.Logf("MetalLB installed and serving %s in %s: routed over %v", vip, time.Since(start).Round(time.Second), nextHops(router, vip))
	} else {
		metallbNode = l.arpOwner(t, router, vip)
		t.Logf("MetalLB installed and serving %s in %s: answered ARP from %s", vip, time.Since(start).Round(time.Second), metallbNode)
	}

	var macs []string
	for _, node := range l.nodeNetns {
		m, _ := inNetns(node, "cat", "/sys/class/net/eth0/address")
		macs = append(macs, node+"="+m)
	}
	t.Logf("the nodes' MACs: %s", strings.Join(macs, " "))

	// The switch, the client asking all along; in L2 a second client holds
	// one keep-alive connection through MetalLB's node and asks over it
	// every 100 ms: it must live through the switch.
	c := l.startClient(vip)
	var held *stream
	if !bgp {
		held = l.keepAlive(t, vip, func(string) bool { return true }).askEvery(100 * time.Millisecond)
	}
	switchStart := time.Now()
	tl := l.startTimeline(switchStart, router, vip)
	defer func() { t.Logf("timeline (after the bundle's install began):%s", tl.stop()) }()
	l.install(t, "--agent-args=--memberlist-port="+agentMemberlistPortBesideMetalLB)
	installed := time.Since(switchStart)
	plan := l.cli(t, "migrate", "metallb", "plan")
	t.Logf("vip-allocator migrate metallb plan:\n%s", plan)
	for _, want := range []string{
		"default/web keeps " + vip,
		"memberlist on port 7946, the agents' on " + agentMemberlistPortBesideMetalLB,
		"addresses: 1 LoadBalancer Services keep theirs, 0 get another",
	} {
		if !strings.Contains(plan, want) {
			t.Errorf("the plan does not say %q", want)
		}
	}
	if strings.Contains(plan, "problems:") {
		t.Fatal("the plan lists problems")
	}
	applied := time.Now()
	t.Logf("vip-allocator migrate metallb apply --scale-down-controller:\n%s", l.cli(t, "migrate", "metallb", "apply", "--scale-down-controller"))
	owner := l.owner(t, vip, "")
	announced := time.Since(applied)
	withdrawMetalLB(t, l, router, vip, owner, metallbNode, metallbHops, bgp)
	time.Sleep(2 * time.Second) // flows already on MetalLB's path finish there
	removing := time.Now()
	l.kubectl(t, "delete", "-f", manifest, "--wait=true", "--timeout=180s")
	removed := time.Since(removing)
	time.Sleep(3 * time.Second) // the agents alone
	ok, failed := c.stop()
	gap := time.Duration(c.maxGap.Load())
	if held != nil {
		answered, broken := held.stop()
		t.Logf("the connection held open through MetalLB's node: %d answers", answered)
		if broken != nil {
			t.Errorf("the connection held open through MetalLB's node broke after %d answers: %v", answered, broken)
		}
	}
	t.Logf("the switch (kube-proxy %s, %s): bundle installed in %s, %s announced by %s %s after apply, MetalLB deleted in %s; "+
		"client: %d requests, %d answered, %d failed, longest wait between two answers %s, over %s",
		mode, map[bool]string{false: "L2", true: "BGP"}[bgp], installed.Round(time.Second), vip, owner,
		announced.Round(time.Millisecond), removed.Round(time.Second), ok+failed, ok, failed,
		gap.Round(time.Millisecond), time.Since(switchStart).Round(time.Second))
	// Not one request may be refused or time out: the agents carry the address
	// on every node before the operator's ipMode Proxy makes kube-proxy let go
	// of it (the owner's report, docs/migration.md), and in L2 the router's
	// ARP entry never leaves MetalLB's node, so no connection in flight
	// reaches a node that never saw its SYN.
	if failed > 0 || ok == 0 {
		t.Errorf("%d of %d requests failed across the switch (times after the bundle's install began; the bundle was installed at +%s, apply ran at +%s, MetalLB's deletion ran from +%s to +%s):%s",
			failed, ok+failed, installed.Round(time.Millisecond), applied.Sub(switchStart).Round(time.Millisecond),
			removing.Sub(switchStart).Round(time.Millisecond), (removing.Sub(switchStart) + removed).Round(time.Millisecond), c.failuresSince(switchStart))
	}
	if moves := tl.moveCount(); !bgp && moves > 0 {
		t.Errorf("the router's ARP entry for %s moved %d times during the switch", vip, moves)
	}

	checkAfterMetalLB(t, l, router, vip, owner, bgp)
}

// metallbConfig is MetalLB's configuration for the lab: a pool of the LAN's
// addresses announced in L2, or (bgp) of the routed pool, peering with the
// router from a second address of each node, which metallbHops lists.
func metallbConfig(t *testing.T, l *lab, env map[string]string, bgp bool) (config string, metallbHops []string) {
	if !bgp {
		config = fmt.Sprintf(`
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: lan, namespace: metallb-system}
spec: {addresses: [%q]}
---
apiVersion: metallb.io/v1beta1
kind: L2Advertisement
metadata: {name: lan, namespace: metallb-system}
`, l.lanPool)
	} else {
		config = fmt.Sprintf(`
apiVersion: metallb.io/v1beta1
kind: IPAddressPool
metadata: {name: routed, namespace: metallb-system}
spec: {addresses: [%q]}
---
apiVersion: metallb.io/v1beta1
kind: BGPAdvertisement
metadata: {name: routed, namespace: metallb-system}
spec: {ipAddressPools: [routed]}
`, env["BGP_POOL"])
		// MetalLB's speakers peer from a second address of each node: the
		// agents peer with the same router from the nodes' own addresses, and
		// a router takes a second session from an address it has one with for
		// a collision and closes one of them (docs/migration.md).
		for i, node := range l.nodeNetns {
			src := fmt.Sprintf("192.0.2.%d", 21+i)
			if out, err := inNetns(node, "ip", "addr", "add", src+"/24", "dev", "eth0"); err != nil {
				t.Fatalf("%s: add %s: %v %s", node, src, err, out)
			}
			metallbHops = append(metallbHops, src)
			config += fmt.Sprintf(`---
apiVersion: metallb.io/v1beta2
kind: BGPPeer
metadata: {name: router-%[1]s, namespace: metallb-system}
spec:
  myASN: %[2]s
  peerASN: %[3]s
  peerAddress: %[4]s
  sourceAddress: %[5]s
  nodeSelectors: [{matchLabels: {kubernetes.io/hostname: %[1]s}}]
`, node, env["NODE_ASN"], env["ROUTER_ASN"], env["ROUTER_IP"], src)
		}
	}
	return config, metallbHops
}

// withdrawMetalLB has MetalLB stop announcing vip once the agents carry it:
// in BGP, once the router has the agents' routes next to MetalLB's, its
// advertisement goes; in L2, once the agents elected MetalLB's node, its
// L2Advertisement goes.
func withdrawMetalLB(t *testing.T, l *lab, router, vip, owner, metallbNode string, metallbHops []string, bgp bool) {
	if bgp {
		want := sorted(append(slices.Clone(metallbHops), l.nodeIPs(t)...))
		testenv.Eventually(t, 90*time.Second, "the router has the agents' routes next to MetalLB's", func() error {
			if hops := sorted(nextHops(router, vip)); !slices.Equal(hops, want) {
				return fmt.Errorf("next hops %v, want %v", hops, want)
			}
			return nil
		})
		// MetalLB's withdrawal, the routes first: its advertisement goes and
		// the speakers withdraw the VIP while their sessions stay up.
		l.kubectl(t, "-n", "metallb-system", "delete", "bgpadvertisement", "routed")
		want = l.nodeIPs(t)
		testenv.Eventually(t, 60*time.Second, "MetalLB's routes withdrawn", func() error {
			if hops := sorted(nextHops(router, vip)); !slices.Equal(hops, want) {
				return fmt.Errorf("next hops %v, want %v", hops, want)
			}
			return nil
		})
	} else {
		// The agents elect the node MetalLB answers from (the ledger's
		// spec.adoptedFromNode, from MetalLB's ServiceL2Status): both
		// speakers answer with one MAC, and the router's ARP entry stays.
		if owner != metallbNode {
			t.Errorf("the agents elected %s for %s, MetalLB answers from %s: the router's ARP entry moves at the switch", owner, vip, metallbNode)
		}
		if from := l.kubectl(t, "get", "ip", vip, "-o", "jsonpath={.spec.adoptedFromNode}"); from != metallbNode {
			t.Errorf("the ledger says %s was adopted from %q, MetalLB's node is %s", vip, from, metallbNode)
		}
		// MetalLB's withdrawal, ARP first: its L2Advertisement goes and the
		// speaker stops answering for the VIP.
		l.kubectl(t, "-n", "metallb-system", "delete", "l2advertisement", "lan")
	}
}

// checkAfterMetalLB: the Service kept its address, the operator holds it,
// MetalLB is gone, and the client reaches vip through the agents alone.
func checkAfterMetalLB(t *testing.T, l *lab, router, vip, owner string, bgp bool) {
	if got := l.kubectl(t, "get", "service", "web", "-o", "jsonpath={.status.loadBalancer.ingress[*].ip}"); got != vip {
		t.Errorf("web shows %q after the switch, MetalLB gave it %s", got, vip)
	}
	if got := l.kubectl(t, "get", "service", "web", "-o", `jsonpath={.status.conditions[?(@.type=="vip.paas.org/IPAllocated")].status}`); got != "True" {
		t.Errorf("web's vip.paas.org/IPAllocated is %q", got)
	}
	if out, err := l.tryKubectl("get", "namespace", "metallb-system"); err == nil {
		t.Errorf("MetalLB's namespace is still there: %s", out)
	}
	for _, node := range l.nodeNetns {
		if pid, err := findProcess(node, "/speaker"); err == nil {
			t.Errorf("MetalLB's speaker still runs on %s (pid %s)", node, pid)
		}
	}
	if !bgp {
		// The router asks anew: only the agents can answer now.
		if out, err := inNetns(router, "ip", "neigh", "flush", "to", vip); err != nil {
			t.Fatalf("flush the router's ARP entry: %v %s", err, out)
		}
		testenv.Eventually(t, 30*time.Second, "web through "+vip+" after MetalLB", func() error {
			_, err := l.fromClient("http://" + vip + "/hostname")
			return err
		})
		if got := l.arpOwner(t, router, vip); got != owner {
			t.Errorf("the router's ARP entry for %s is %s's, the ledger names %s", vip, got, owner)
		}
	} else {
		testenv.Eventually(t, 30*time.Second, "web through "+vip+" after MetalLB", func() error {
			_, err := l.fromClient("http://" + vip + "/hostname")
			return err
		})
	}
	if events := l.kubectl(t, "get", "events", "-A", "--field-selector", "reason=ARPConflict", "-o", "name"); events != "" {
		t.Errorf("the hand-over was reported as an ARP conflict: %s", events)
	}
}

// metallbManifest is MetalLB's native-mode manifest as its module ships it
// (hack/metallb.sh copies it beside the binaries), and the image tarballs of
// the controller and the speaker it names (hack/images.sh).
func metallbManifest(t *testing.T) (manifest string, images []string) {
	t.Helper()
	root := testenv.RepoRoot()
	manifest = filepath.Join(root, "bin", "metallb", "metallb-native.yaml")
	images = []string{filepath.Join(root, "bin", "images", "metallb", "controller.tar"), filepath.Join(root, "bin", "images", "metallb", "speaker.tar")}
	for _, f := range append([]string{manifest}, images...) {
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("%v: run 'make images' (it builds MetalLB with hack/metallb.sh)", err)
		}
	}
	return manifest, images
}

// cli runs bin/vip-allocator with the cluster's admin kubeconfig and fails the test on an error.
func (l *lab) cli(t *testing.T, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.RepoRoot(), "bin", "vip-allocator"), append(args, "--kubeconfig", l.kubeconfig)...)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("vip-allocator %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

// arpOwner is the node whose MAC the router's ARP entry for vip holds.
func (l *lab) arpOwner(t *testing.T, router, vip string) string {
	t.Helper()
	var mac string
	testenv.Eventually(t, 10*time.Second, "the router's ARP entry for "+vip, func() error {
		out, err := inNetns(router, "ip", "neigh", "show", "to", vip, "dev", "eth0")
		f := strings.Fields(out)
		if err != nil || len(f) < 3 || f[1] != "lladdr" {
			return fmt.Errorf("%q %v", out, err)
		}
		mac = f[2]
		return nil
	})
	for _, node := range l.nodeNetns {
		if m, _ := inNetns(node, "cat", "/sys/class/net/eth0/address"); m == mac {
			return node
		}
	}
	return "no node (" + mac + ")"
}

// nodeIPs are the nodes' LAN addresses, sorted.
func (l *lab) nodeIPs(t *testing.T) []string {
	t.Helper()
	out := l.kubectl(t, "get", "nodes", "-o", `jsonpath={.items[*].status.addresses[?(@.type=="InternalIP")].address}`)
	return sorted(strings.Fields(out))
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// findProcess is the pid of a process in the node's network namespace whose
// command line holds name.
func findProcess(node, name string) (string, error) {
	out, err := inNetns(node, "ip", "netns", "pids", node)
	if err != nil {
		return "", fmt.Errorf("pids of %s: %v %s", node, err, out)
	}
	for _, pid := range strings.Fields(out) {
		cmdline, _ := os.ReadFile("/proc/" + pid + "/cmdline")
		if strings.Contains(string(cmdline), name) {
			return pid, nil
		}
	}
	return "", fmt.Errorf("no %s process in %s", name, node)
}

// timeline samples what decides a VIP's path every 100 ms: the Service's
// ingress (address, ipMode), the ledger's hand-over from kube-proxy (awaiting
// the data path, who announces, who reported it programmed), the router's ARP
// entry (BGP: its routes), and records each change with its time after t0.
type timeline struct {
	t0   time.Time
	done chan struct{}
	wg   sync.WaitGroup
	// monitor is 'ip monitor neigh' in the router's namespace: every change of
	// its ARP entry as it happens, which the sampling misses (a move and back
	// between two samples under load).
	monitor *exec.Cmd
	mu      sync.Mutex
	changes []string
	// moves are when the router's ARP entry changed MAC.
	moves []time.Time
}

// note records a change of what with its time after t0.
func (tl *timeline) note(what, now string) {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	tl.changes = append(tl.changes, fmt.Sprintf("+%s %s: %s", time.Since(tl.t0).Round(10*time.Millisecond), what, strings.ReplaceAll(now, "\n", " | ")))
}

// watchARP records every change of the router's ARP entry for vip, and the
// moves among them, from 'ip monitor neigh' (nothing when it cannot start).
func (tl *timeline) watchARP(router, vip string) {
	tl.monitor = exec.Command("ip", "netns", "exec", router, "ip", "monitor", "neigh")
	out, err := tl.monitor.StdoutPipe()
	if err != nil || tl.monitor.Start() != nil {
		tl.monitor = nil
		return
	}
	tl.wg.Add(1)
	go func() {
		defer tl.wg.Done()
		sc := bufio.NewScanner(out)
		mac := ""
		for sc.Scan() {
			line := sc.Text()
			if !strings.HasPrefix(line, vip+" ") && !strings.HasPrefix(line, "Deleted "+vip+" ") {
				continue
			}
			tl.note("router ARP event", line)
			if m := lladdr(line); m != "" && m != mac {
				if mac != "" {
					tl.mu.Lock()
					tl.moves = append(tl.moves, time.Now())
					tl.mu.Unlock()
				}
				mac = m
			}
		}
	}()
}

// moveCount is how often the router's ARP entry moved to another MAC.
func (tl *timeline) moveCount() int {
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return len(tl.moves)
}

// lladdr is the MAC of an 'ip neigh' line, "" when it has none.
func lladdr(neigh string) string {
	f := strings.Fields(neigh)
	if i := slices.Index(f, "lladdr"); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	return ""
}

func (l *lab) startTimeline(t0 time.Time, router, vip string) *timeline {
	tl := &timeline{t0: t0, done: make(chan struct{})}
	tl.watchARP(router, vip)
	tl.wg.Add(1)
	go func() {
		defer tl.wg.Done()
		last := map[string]string{}
		for {
			ingress, _ := l.tryKubectl("get", "service", "web", "-o", "jsonpath={.status.loadBalancer.ingress}")
			neigh, _ := inNetns(router, "ip", "neigh", "show", "to", vip)
			route, _ := inNetns(router, "ip", "route", "show", vip+"/32")
			ledger, err := l.tryKubectl("get", "ip", vip, "-o", "jsonpath=awaiting={.spec.awaitingDataPath} announcedBy={.status.announcedBy} programmedBy={.status.programmedBy}")
			if err != nil {
				ledger = "none"
			}
			for _, kv := range [][2]string{{"service ingress", ingress}, {"ledger", ledger}, {"router ARP", neigh}, {"router route", route}} {
				if last[kv[0]] != kv[1] {
					last[kv[0]] = kv[1]
					tl.note(kv[0], kv[1])
				}
			}
			select {
			case <-tl.done:
				return
			case <-time.After(100 * time.Millisecond):
			}
		}
	}()
	return tl
}

func (tl *timeline) stop() string {
	select {
	case <-tl.done:
	default:
		close(tl.done)
		if tl.monitor != nil {
			_ = tl.monitor.Process.Kill()
		}
	}
	tl.wg.Wait()
	if tl.monitor != nil {
		_ = tl.monitor.Wait()
	}
	tl.mu.Lock()
	defer tl.mu.Unlock()
	return "\n  " + strings.Join(tl.changes, "\n  ")
}
