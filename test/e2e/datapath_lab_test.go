//go:build root && envtest

package e2e

import (
	"context"
	"crypto/rand"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/cmd"
	"github.com/paas-org/vip-allocator-operator/test/operatortest"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// dataLab is the topology: a client and two nodes on a LAN (203.0.113.0/24),
// the nodes and two backends on a pod network (198.51.100.0/24); backend1 runs
// on node1 and routes through it, backend2 on node2. VIPs come from 192.0.2.0/24.
type dataLab struct {
	*lab
	env    *testenv.Env
	root   string
	agents map[string]*exec.Cmd
	// agentLogs are the agents' log files (node → path).
	agentLogs map[string]string
	// stopOperator stops the operator before the test ends (idempotent).
	stopOperator func()
	// apiServerFlags are passed to the lab's kube-apiserver (testenv.Start).
	apiServerFlags []string
	// binaries are the vip-allocator builds some nodes' agents run instead
	// of binary's (node → path; a rolling upgrade).
	binaries map[string]string
}

func setup(t testing.TB, apiServerFlags ...string) *dataLab {
	d := newDataLab(t)
	d.apiServerFlags = apiServerFlags
	d.addNS("sw", "client", "node1", "node2", "backend1", "backend2")
	d.addBridge("lan")
	d.addBridge("pods")
	d.plug("client", "eth0", "lan", "203.0.113.10/24")
	d.plug("node1", "eth0", "lan", "203.0.113.11/24")
	d.plug("node2", "eth0", "lan", "203.0.113.12/24")
	d.plug("node1", "pods", "pods", "198.51.100.1/24")
	d.plug("node2", "pods", "pods", "198.51.100.2/24")
	d.plug("backend1", "eth0", "pods", "198.51.100.11/24")
	d.plug("backend2", "eth0", "pods", "198.51.100.12/24")
	// Nodes route everything else to a LAN gateway, as real nodes do: so VIP
	// traffic that is not forwarded reaches the filter table and is rejected.
	d.in("node1", "ip", "route", "add", "default", "via", "203.0.113.1")
	d.in("node2", "ip", "route", "add", "default", "via", "203.0.113.1")
	d.in("backend1", "ip", "route", "add", "default", "via", "198.51.100.1")
	d.in("backend2", "ip", "route", "add", "default", "via", "198.51.100.2")
	for _, b := range []string{"backend1", "backend2"} {
		serveWhoAmI(t, d.listen(b, ":8080"), b)
	}
	d.startControlPlane(t, map[string]string{"node1": "203.0.113.11", "node2": "203.0.113.12"})
	return d
}

// newDataLab checks the prerequisites and returns an empty lab.
func newDataLab(t testing.TB) *dataLab {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	if os.Geteuid() != 0 {
		t.Fatal("the data-path tests build network namespaces and need root")
	}
	root := testenv.RepoRoot()
	if _, err := os.Stat(binary(root)); err != nil {
		t.Fatal("bin/vip-allocator is missing: run 'make build' (make test does), or point $VIP_ALLOCATOR_BIN at a build")
	}
	return &dataLab{lab: newLab(t), root: root, agents: map[string]*exec.Cmd{}, agentLogs: map[string]string{}}
}

// startControlPlane starts the API server and the operator, and makes each
// node (name → InternalIP) a Node object whose namespace reaches the API
// server at 127.0.0.1:6443 with the agent's identity.
func (d *dataLab) startControlPlane(t testing.TB, nodes map[string]string) {
	env, err := testenv.Start(d.apiServerFlags...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { env.Stop() })
	d.env = env
	d.installOperator(t)

	// Agents authenticate as their ServiceAccount bound to their node (see
	// agentKubeconfig) and reach the API server through a forwarder inside
	// their node namespace.
	api, err := url.Parse(env.AdminConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	for n, ip := range nodes {
		d.forward(n, "127.0.0.1:6443", api.Host)
		d.addNode(t, n, ip, nil)
	}
}

// agentKubeconfig is the kubeconfig of node's agent: the agents' ServiceAccount
// with the node bound into its identity, as a DaemonSet pod's token binds it,
// so the admission policies that hold each agent to its own node apply.
func (d *dataLab) agentKubeconfig(t testing.TB, node string) string {
	return writeKubeconfig(t, d.env.AgentConfig(node), "https://127.0.0.1:6443")
}

// binary is the vip-allocator the agents run: $VIP_ALLOCATOR_BIN, or bin/vip-allocator.
func binary(root string) string {
	if b := os.Getenv("VIP_ALLOCATOR_BIN"); b != "" {
		return b
	}
	return filepath.Join(root, "bin", "vip-allocator")
}

// installOperator writes the gossip key the operator would create and runs
// the operator.
func (d *dataLab) installOperator(t testing.TB) {
	// The agents here are processes, not a DaemonSet: the operator deploys
	// none, and the lab writes the gossip key it would create.
	key := make([]byte, 32)
	_, _ = rand.Read(key)
	if err := d.env.Admin.Create(context.Background(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Namespace: "vip-allocator-operator", Name: paasv1.MemberlistSecret},
		Data:       map[string][]byte{paasv1.MemberlistKey: key}}); err != nil {
		t.Fatal(err)
	}
	d.runOperator(t)
}

// runOperator runs the operator in this process until d.stopOperator or the
// test's end: the operator as shipped (cmd/operator.go's defaults), since
// bench-announce times it giving 1,000 Services their IPs.
func (d *dataLab) runOperator(t testing.TB) {
	stop, err := operatortest.Start(d.env.OperatorConfig, cmd.OperatorOptions{MetricsAddr: "0", ProbeAddr: "0", Workers: cmd.DefaultWorkers, IPMode: "Proxy",
		QPS: cmd.DefaultQPS, Burst: cmd.DefaultBurst})
	if err != nil {
		t.Fatal(err)
	}
	d.stopOperator = func() { _ = stop() }
	t.Cleanup(d.stopOperator)
}

// addNode creates the Node object of a lab node (what the kubelet would).
func (d *dataLab) addNode(t testing.TB, name, internalIP string, labels map[string]string) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}}
	if err := d.env.Admin.Create(context.Background(), n); err != nil {
		t.Fatal(err)
	}
	n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: internalIP}}
	if err := d.env.Admin.Status().Update(context.Background(), n); err != nil {
		t.Fatal(err)
	}
}

// startAgent runs a real agent process in node's namespace.
func (d *dataLab) startAgent(t testing.TB, node string, extra ...string) {
	bin := binary(d.root)
	if b, ok := d.binaries[node]; ok {
		bin = b
	}
	args := append([]string{"netns", "exec", d.ns(node), bin, "agent",
		"--node-name", node, "--kubeconfig", d.agentKubeconfig(t, node), "--resync-period", "3s", "--check-period", "500ms",
		"--metrics-bind-address", "0", "--health-probe-bind-address", "0"}, extra...)
	c := exec.Command("ip", args...)
	log, err := os.Create(filepath.Join(t.TempDir(), node+"-agent.log"))
	if err != nil {
		t.Fatal(err)
	}
	c.Stdout, c.Stderr = log, log
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	d.agents[node] = c
	d.agentLogs[node] = log.Name()
	t.Cleanup(func() {
		d.stopAgent(node)
		if t.Failed() {
			out, _ := os.ReadFile(log.Name())
			t.Logf("%s agent log:\n%s", node, out)
		}
	})
}

// waitDataPlanes waits until the agent of each of nodes runs its data plane controller (its
// caches synced: it programs what it is shown from then on), as its log says.
func (d *dataLab) waitDataPlanes(t testing.TB, nodes ...string) {
	t.Helper()
	for _, n := range nodes {
		testenv.Eventually(t, settle, n+"'s agent runs its data plane", func() error {
			out, err := os.ReadFile(d.agentLogs[n])
			if err != nil {
				return err
			}
			lines := strings.Split(strings.TrimSpace(string(out)), "\n")
			for _, line := range lines {
				if strings.Contains(line, `"msg":"Starting workers"`) && strings.Contains(line, `"controller":"dataplane"`) {
					return nil
				}
			}
			// An agent that exited says why on its last line.
			return fmt.Errorf("its log does not show the data plane's workers started; its last line: %s", lines[len(lines)-1])
		})
	}
}

func (d *dataLab) stopAgent(node string) {
	if c := d.agents[node]; c != nil {
		_ = c.Process.Signal(os.Interrupt)
		_ = c.Process.Signal(syscall.SIGCONT) // a test may have frozen it (SIGSTOP): it must see the interrupt
		_ = c.Wait()
		delete(d.agents, node)
	}
}

// curl asks url from the client namespace; it returns the body, or "" and the error.
func (d *dataLab) curl(target string) (string, error) {
	out, err := exec.Command("ip", "netns", "exec", d.ns("client"), "curl", "-sS", "--max-time", "2", target).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("curl %s: %v: %s", target, err, out)
	}
	return string(out), nil
}

// refused checks that a connection to target is refused at once (curl's exit
// code 7 within a few hundred milliseconds: not a timeout, not an unreachable gateway).
func (d *dataLab) refused(target string) error {
	start := time.Now()
	_, err := d.curl(target)
	// Exit 7 is a refusal (a reset or an ICMP unreachable); a drop would be curl's
	// timeout (28). The bound only catches a refusal that waited for a retry: the
	// time includes starting curl in the namespace, slow on a loaded machine.
	if took := time.Since(start); err == nil || !strings.Contains(err.Error(), "exit status 7") || took > 2*time.Second {
		return fmt.Errorf("want a prompt refusal of %s, got %v after %s", target, err, took)
	}
	return nil
}

// via routes the VIP range from the client through node.
func (d *dataLab) via(node string) {
	gw := map[string]string{"node1": "203.0.113.11", "node2": "203.0.113.12"}[node]
	d.in("client", "ip", "route", "replace", "192.0.2.0/24", "via", gw)
}

// backendsSeen curls url n times and returns which backends answered.
func (d *dataLab) backendsSeen(target string, n int) (map[string]bool, error) {
	seen := map[string]bool{}
	for range n {
		body, err := d.curl(target)
		if err != nil {
			return seen, err
		}
		seen[strings.Fields(body)[0]] = true
	}
	return seen, nil
}

func serveWhoAmI(t testing.TB, ln net.Listener, name string) {
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "%s %s\n", name, host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// serveUDPName answers every UDP datagram on addr in namespace ns with the namespace's name.
func serveUDPName(t testing.TB, l *lab, ns, addr string) {
	var pc net.PacketConn
	if err := l.inNetns(ns, func() (err error) { pc, err = net.ListenPacket("udp", addr); return err }); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { pc.Close() })
	go func() {
		buf := make([]byte, 512)
		for {
			_, from, err := pc.ReadFrom(buf)
			if err != nil {
				return
			}
			_, _ = pc.WriteTo([]byte(ns), from)
		}
	}()
}

// udpAsk sends a datagram from the client namespace and returns the answer.
func (d *dataLab) udpAsk(target string) (string, error) {
	var conn net.Conn
	if err := d.inNetns("client", func() (err error) { conn, err = net.Dial("udp", target); return err }); err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(time.Second))
	if _, err := conn.Write([]byte("who?")); err != nil {
		return "", err
	}
	buf := make([]byte, 512)
	n, err := conn.Read(buf)
	return string(buf[:n]), err
}

func writeKubeconfig(t testing.TB, cfg *rest.Config, server string) string {
	kc := clientcmdapi.NewConfig()
	kc.Clusters["c"] = &clientcmdapi.Cluster{Server: server, CertificateAuthorityData: cfg.CAData}
	kc.AuthInfos["u"] = &clientcmdapi.AuthInfo{ClientCertificateData: cfg.CertData, ClientKeyData: cfg.KeyData,
		Impersonate: cfg.Impersonate.UserName, ImpersonateGroups: cfg.Impersonate.Groups, ImpersonateUserExtra: cfg.Impersonate.Extra}
	kc.Contexts["c"] = &clientcmdapi.Context{Cluster: "c", AuthInfo: "u"}
	kc.CurrentContext = "c"
	path := filepath.Join(t.TempDir(), "agent.kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// endpointSlice is the EndpointSlice of svc's backends (address → node), all of one family, as
// the EndpointSlice controller writes it.
func endpointSlice(ns, svc string, backends map[string]string) *discoveryv1.EndpointSlice {
	es := &discoveryv1.EndpointSlice{
		ObjectMeta:  metav1.ObjectMeta{Namespace: ns, Name: svc + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: svc}},
		AddressType: discoveryv1.AddressTypeIPv4,
		// One port per Service port name, as the EndpointSlice controller writes them.
		Ports: []discoveryv1.EndpointPort{
			{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)},
			{Name: ptr.To("alt"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)},
		},
	}
	for addr, node := range backends {
		if strings.Contains(addr, ":") {
			es.AddressType = discoveryv1.AddressTypeIPv6
		}
		es.Endpoints = append(es.Endpoints, discoveryv1.Endpoint{Addresses: []string{addr}, NodeName: ptr.To(node),
			Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}})
	}
	return es
}

// ruleset dumps node's iptables rules and its whole nftables ruleset (our table, iptables-nft's
// tables, anyone else's) without counters, for comparison.
func (d *dataLab) ruleset(node string) string {
	nft := regexp.MustCompile(`counter packets \d+ bytes \d+`).ReplaceAllString(d.in(node, "nft", "list", "ruleset"), "counter")
	return d.iptablesSave(node) + "\n" + nft
}

// hasAgentRules reports whether a ruleset dump holds rules of either data plane.
func hasAgentRules(dump string) bool {
	return strings.Contains(dump, "VIPA-SERVICES") || strings.Contains(dump, "table ip vip-allocator")
}

// iptablesSave dumps node's rules without comments and counters, for comparison.
func (d *dataLab) iptablesSave(node string) string {
	var out []string
	for _, tool := range []string{"iptables-save", "ip6tables-save"} {
		for _, line := range strings.Split(d.in(node, tool), "\n") {
			if strings.HasPrefix(line, "#") {
				continue
			}
			out = append(out, regexp.MustCompile(`\[\d+:\d+\]`).ReplaceAllString(line, "[0:0]"))
		}
	}
	return strings.Join(out, "\n")
}
