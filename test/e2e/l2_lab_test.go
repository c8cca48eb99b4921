//go:build root && envtest

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os/exec"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// l2Lab: a client and three nodes on one LAN, 192.0.2.0/24, where the VIPs
// live too (the client finds them by ARP, with no route); the nodes and one
// backend on a pod network, 198.51.100.0/24, the backend running on node1.
type l2Lab struct {
	*dataLab
	macs      map[string]string // node → MAC of its LAN interface
	agentArgs []string          // the agents' extra flags, for restarts
}

var lanIP = map[string]string{"node1": "192.0.2.11", "node2": "192.0.2.12", "node3": "192.0.2.13"}

func setupL2(t testing.TB) *l2Lab {
	d := &l2Lab{dataLab: newDataLab(t), macs: map[string]string{}}
	d.addNS("sw", "client", "node1", "node2", "node3", "backend1")
	d.addBridge("lan")
	d.addBridge("pods")
	d.plug("client", "eth0", "lan", "192.0.2.2/24")
	for i, n := range []string{"node1", "node2", "node3"} {
		d.plug(n, "eth0", "lan", lanIP[n]+"/24")
		d.plug(n, "pods", "pods", fmt.Sprintf("198.51.100.%d/24", i+1))
		d.macs[n] = strings.TrimSpace(d.in(n, "cat", "/sys/class/net/eth0/address"))
	}
	d.plug("backend1", "eth0", "pods", "198.51.100.11/24")
	d.in("backend1", "ip", "route", "add", "default", "via", "198.51.100.1")
	serveWhoAmI(t, d.listen("backend1", ":8080"), "backend1")
	d.startControlPlane(t, lanIP)
	return d
}

// lanService is a LoadBalancer Service for the backend, in Cluster or Local mode.
// announcedLab is the L2 lab with an agent in each node (with agentArgs, kept for
// restarts), the group "lan" and the Service "web" announced: it returns web, its
// VIP and the VIP's owner.
func announcedLab(t testing.TB, agentArgs ...string) (d *l2Lab, web *corev1.Service, vip, owner string) {
	d = setupL2(t)
	d.agentArgs = agentArgs
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n, agentArgs...)
	}
	if err := d.env.Admin.Create(context.Background(), &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"},
		Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24", ExcludedIPs: []string{"192.0.2.0/27", "192.0.2.255"}}}); err != nil {
		t.Fatal(err)
	}
	web = d.lanService(t, "web", false)
	vip = d.vipOf(t, web)
	owner = d.owner(t, vip, "")
	t.Logf("%s is announced by %s", vip, owner)
	return d, web, vip, owner
}

func (d *l2Lab) lanService(t testing.TB, name string, local bool, annotations ...string) *corev1.Service {
	return d.createService(t, name, local, map[string]string{"198.51.100.11": "node1"}, annotations...)
}

// createService creates a LoadBalancer Service (port 80 to the endpoints'
// port "http", no selector), in Cluster or Local mode, and its EndpointSlice
// of backends (address → node). The Service is of the backends' family: IPv4,
// or IPv6 on the dual-stack lab.
func (d *dataLab) createService(t testing.TB, name string, local bool, backends map[string]string, annotations ...string) *corev1.Service {
	svc := testenv.LoadBalancerService("default", name, func(s *corev1.Service) {
		s.Annotations = map[string]string{}
		s.Spec.Selector = nil
		s.Spec.Ports[0].TargetPort = intstr.FromString("http")
		s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false)
	})
	es := endpointSlice("default", name, backends)
	if es.AddressType == discoveryv1.AddressTypeIPv6 {
		svc.Spec.IPFamilies = []corev1.IPFamily{corev1.IPv6Protocol}
	}
	for i := 0; i+1 < len(annotations); i += 2 {
		svc.Annotations[annotations[i]] = annotations[i+1]
	}
	if local {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	ctx := context.Background()
	if err := d.env.Admin.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := d.env.Admin.Create(ctx, es); err != nil {
		t.Fatal(err)
	}
	return svc
}

// vipOf waits for svc's VIP.
func (d *dataLab) vipOf(t testing.TB, svc *corev1.Service) string {
	var vip string
	testenv.Eventually(t, settle, "the Service gets a VIP", func() error {
		if err := d.env.Admin.Get(context.Background(), client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		if len(svc.Status.LoadBalancer.Ingress) == 0 {
			return fmt.Errorf("no ingress yet")
		}
		vip = svc.Status.LoadBalancer.Ingress[0].IP
		return nil
	})
	return vip
}

// announcer is the node the ledger says announces vip ("" for none).
func (d *l2Lab) announcer(vip string) string {
	var ip paasv1.IP
	if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: paasv1.IPObjectName(netip.MustParseAddr(vip))}, &ip); err != nil || len(ip.Status.AnnouncedBy) != 1 {
		return ""
	}
	return ip.Status.AnnouncedBy[0]
}

var arpReply = regexp.MustCompile(`(?i)reply from \S+ \[([0-9a-f:]+)\]`)

// arpAnswers asks for vip from the client and returns the distinct MACs that answered.
func (d *l2Lab) arpAnswers(vip string) []string { return d.arping(vip, "-c", "3", "-w", "2") }

// neighbourAnswers is how the client asks who has vip, arpAnswers or, for
// IPv6, ndpAnswers, and the protocol's name.
func (d *l2Lab) neighbourAnswers(vip string) (answers func(vip string) []string, protocol string) {
	if strings.Contains(vip, ":") {
		return d.ndpAnswers, "NDP"
	}
	return d.arpAnswers, "ARP"
}

// arping runs arping for vip from the client with args and returns the
// distinct MACs that answered.
func (d *l2Lab) arping(vip string, args ...string) []string {
	cmd := append(append([]string{"netns", "exec", d.ns("client"), "arping"}, args...), "-I", "eth0", vip)
	out, _ := exec.Command("ip", cmd...).CombinedOutput()
	var macs []string
	for _, m := range arpReply.FindAllStringSubmatch(string(out), -1) {
		if mac := strings.ToLower(m[1]); !slices.Contains(macs, mac) {
			macs = append(macs, mac)
		}
	}
	return macs
}

// owner waits until exactly one node, other than not, answers ARP (NDP for
// IPv6) for vip and the ledger names it; it returns that node.
func (d *l2Lab) owner(t testing.TB, vip, not string) string {
	t.Helper()
	var node string
	answers, protocol := d.neighbourAnswers(vip)
	testenv.Eventually(t, settle, "one node answers "+protocol+" for "+vip, func() error {
		node = d.announcer(vip)
		if node == "" || node == not {
			return fmt.Errorf("ledger says %q announces %s", node, vip)
		}
		if macs := answers(vip); len(macs) != 1 || macs[0] != d.macs[node] {
			return fmt.Errorf("%s answers for %s: %v, want only %s's %s", protocol, vip, macs, node, d.macs[node])
		}
		return nil
	})
	return node
}

// loop curls target at 20 Hz from the client until stop; it counts failures.
type loop struct {
	ok, failed atomic.Int64
	stop       chan struct{}
	wg         sync.WaitGroup
	firstErr   atomic.Value
	mu         sync.Mutex
	failures   []failedRequest // each failed request, when it ran
}

// failedRequest is one request the loop saw fail, from its start to its end.
type failedRequest struct {
	start, end time.Time
	err        error
}

func (d *dataLab) curlLoop(target string) *loop {
	return runLoop(func() error { _, err := d.curl(target); return err })
}

// heldConnection sends a request every 50 ms on one keep-alive TCP connection
// from the client to hostport, as a long-lived client (a database session, a
// watch) does. Once a request fails the connection is broken: every later
// round counts as failed too.
func (d *l2Lab) heldConnection(t testing.TB, hostport string) *loop {
	t.Helper()
	var conn net.Conn
	if err := d.inNetns("client", func() (err error) {
		conn, err = net.DialTimeout("tcp", hostport, 2*time.Second)
		return err
	}); err != nil {
		t.Fatalf("connect to %s: %v", hostport, err)
	}
	t.Cleanup(func() { conn.Close() })
	in := bufio.NewReader(conn)
	var broken error
	return runLoop(func() error {
		if broken != nil {
			return broken
		}
		_ = conn.SetDeadline(time.Now().Add(2 * time.Second))
		_, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: vip\r\n\r\n")
		if err == nil {
			var resp *http.Response
			if resp, err = http.ReadResponse(in, nil); err == nil {
				_, err = io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
			}
		}
		if err != nil {
			broken = fmt.Errorf("the held connection broke: %w", err)
		}
		return broken
	})
}

// runLoop calls do at 20 Hz until end; it counts failures.
func runLoop(do func() error) *loop {
	l := &loop{stop: make(chan struct{})}
	l.wg.Add(1)
	go func() {
		defer l.wg.Done()
		tick := time.NewTicker(50 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-l.stop:
				return
			case <-tick.C:
			}
			start := time.Now()
			if err := do(); err != nil {
				l.failed.Add(1)
				l.firstErr.CompareAndSwap(nil, err.Error())
				l.mu.Lock()
				l.failures = append(l.failures, failedRequest{start, time.Now(), err})
				l.mu.Unlock()
			} else {
				l.ok.Add(1)
			}
		}
	}()
	return l
}

func (l *loop) end() (ok, failed int64, firstErr any) {
	close(l.stop)
	l.wg.Wait()
	return l.ok.Load(), l.failed.Load(), l.firstErr.Load()
}
