//go:build root && envtest

package e2e

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// The steering lab is the L2 lab with a backend on every node: backendN
// (198.51.100.1N) runs on nodeN and routes through it, so nodeN's conntrack is
// the only one that knows the connections it serves.
var steerBackends = map[string]string{"198.51.100.11": "node1", "198.51.100.12": "node2", "198.51.100.13": "node3"}

// backendNode is the node backendN runs on.
func backendNode(backend string) string { return "node" + strings.TrimPrefix(backend, "backend") }

// steerLab starts the lab, an agent on each node, the group "lan" with data
// path path, and the Service "web" (policy Local or Cluster) with one endpoint
// on each node; it returns the Service's VIP and its owner, once new
// connections through the VIP reach all three backends.
func steerLab(t testing.TB, path paasv1.DataPath, local bool) (d *l2Lab, vip, owner string) {
	d = &l2Lab{dataLab: newDataLab(t), macs: map[string]string{}}
	d.addNS("sw", "client", "node1", "node2", "node3", "backend1", "backend2", "backend3")
	d.addBridge("lan")
	d.addBridge("pods")
	d.plug("client", "eth0", "lan", "192.0.2.2/24")
	for i, n := range []string{"node1", "node2", "node3"} {
		d.plug(n, "eth0", "lan", lanIP[n]+"/24")
		d.plug(n, "pods", "pods", fmt.Sprintf("198.51.100.%d/24", i+1))
		d.macs[n] = strings.TrimSpace(d.in(n, "cat", "/sys/class/net/eth0/address"))
		b := fmt.Sprintf("backend%d", i+1)
		d.plug(b, "eth0", "pods", fmt.Sprintf("198.51.100.1%d/24", i+1))
		d.in(b, "ip", "route", "add", "default", "via", fmt.Sprintf("198.51.100.%d", i+1))
		serveWhoAmI(t, d.listen(b, ":8080"), b)
	}
	d.startControlPlane(t, lanIP)
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n)
	}
	if err := d.env.Admin.Create(context.Background(), &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"},
		Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24", ExcludedIPs: []string{"192.0.2.0/27", "192.0.2.255"}, DataPath: path}}); err != nil {
		t.Fatal(err)
	}
	web := d.createService(t, "web", local, steerBackends)
	vip = d.vipOf(t, web)
	owner = d.owner(t, vip, "")
	testenv.Eventually(t, settle, "new connections to "+vip+" reach every backend", func() error {
		seen, err := d.backendsSeen(vipURL(vip), 30)
		if err != nil {
			return err
		}
		if len(seen) != 3 {
			return fmt.Errorf("30 connections reached %v", seen)
		}
		return nil
	})
	t.Logf("%s (data path %s) is announced by %s", vip, path, owner)
	return d, vip, owner
}

// keptConn is one long-lived connection from the client to the VIP.
type keptConn struct {
	conn    net.Conn
	in      *bufio.Reader
	backend string // who answered its first request
}

// ask sends one request on c and returns the backend that answered and the
// client address it saw.
func (c *keptConn) ask(timeout time.Duration) (backend, client string, err error) {
	_ = c.conn.SetDeadline(time.Now().Add(timeout))
	if _, err := io.WriteString(c.conn, "GET / HTTP/1.1\r\nHost: vip\r\n\r\n"); err != nil {
		return "", "", err
	}
	resp, err := http.ReadResponse(c.in, nil)
	if err != nil {
		return "", "", err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if err != nil {
		return "", "", err
	}
	f := strings.Fields(string(body))
	if len(f) != 2 {
		return "", "", fmt.Errorf("answer %q", body)
	}
	return f[0], f[1], nil
}

// openConns opens n connections from the client to hostport, each with one
// request answered.
func (d *l2Lab) openConns(t testing.TB, hostport string, n int) []*keptConn {
	var out []*keptConn
	for range n {
		var c net.Conn
		if err := d.inNetns("client", func() (err error) {
			c, err = net.DialTimeout("tcp", hostport, 2*time.Second)
			return err
		}); err != nil {
			t.Fatalf("connect to %s: %v", hostport, err)
		}
		t.Cleanup(func() { c.Close() })
		k := &keptConn{conn: c, in: bufio.NewReader(c)}
		var err error
		if k.backend, _, err = k.ask(2 * time.Second); err != nil {
			t.Fatalf("first request on a connection to %s: %v", hostport, err)
		}
		out = append(out, k)
	}
	return out
}

// TestSteeringKeepsConnectionsOnFailover holds 50 TCP connections open to a VIP
// whose endpoints sit on all three nodes, takes the owner's LAN link down, and
// asks on each connection again once another node owns the VIP. With steering
// every connection whose serving node is alive goes on (the new owner steers
// each flow where the old one did, and the serving node's conntrack never
// changed); with the entry node's DNAT (dataPath EntryNode) the new owner has
// no state for any of them.
func TestSteeringKeepsConnectionsOnFailover(t *testing.T) {
	const m = 50
	for _, path := range []paasv1.DataPath{paasv1.DataPathSteering, paasv1.DataPathEntryNode} {
		t.Run(string(path), func(t *testing.T) {
			d, vip, owner := steerLab(t, path, false)
			conns := d.openConns(t, vipHostPort(vip), m)
			servedByOwner := 0
			for _, c := range conns {
				if backendNode(c.backend) == owner {
					servedByOwner++
				}
			}
			d.in(owner, "ip", "link", "set", "eth0", "down")
			t.Cleanup(func() { d.in(owner, "ip", "link", "set", "eth0", "up") })
			start := time.Now()
			for d.clientNeighbour(vip) == d.macs[owner] || d.clientNeighbour(vip) == "" {
				if time.Since(start) > 30*time.Second {
					t.Fatalf("no other node took %s over within 30 s", vip)
				}
				time.Sleep(20 * time.Millisecond)
			}
			took := time.Since(start)
			kept := make([]bool, len(conns))
			errs := make([]error, len(conns))
			var wg sync.WaitGroup
			for i, c := range conns {
				wg.Add(1)
				go func() {
					defer wg.Done()
					backend, _, err := c.ask(10 * time.Second)
					switch {
					case err != nil:
						errs[i] = err
					case backend != c.backend:
						errs[i] = fmt.Errorf("answered by %s, first by %s", backend, c.backend)
					default:
						kept[i] = true
					}
				}()
			}
			wg.Wait()
			n := 0
			for i, c := range conns {
				if kept[i] {
					n++
				} else if path == paasv1.DataPathSteering && backendNode(c.backend) != owner {
					t.Errorf("a connection served by %s (alive) broke: %v", backendNode(c.backend), errs[i])
				}
			}
			fmt.Printf("failover-kept: %d of %d connections kept (dataPath %s; %s's LAN link down, taken over in %v; %d served by it)\n",
				n, m, path, owner, took.Round(10*time.Millisecond), servedByOwner)
			if path == paasv1.DataPathSteering && n != m-servedByOwner {
				t.Errorf("steering kept %d of %d connections, want all %d whose serving node is alive", n, m, m-servedByOwner)
			}
		})
	}
}

// TestSteeringSpreadsLocalInLayer2: a policy Local Service with one endpoint on
// each node, announced by one owner in layer 2. Steering spreads new
// connections over all three nodes' endpoints (the owner's alone serve them
// without it), and each endpoint sees the client's own address.
func TestSteeringSpreadsLocalInLayer2(t *testing.T) {
	const n = 300
	d, vip, _ := steerLab(t, paasv1.DataPathSteering, true)
	count := map[string]int{}
	for range n {
		var c net.Conn
		if err := d.inNetns("client", func() (err error) {
			c, err = net.DialTimeout("tcp", vipHostPort(vip), 2*time.Second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		k := &keptConn{conn: c, in: bufio.NewReader(c)}
		backend, client, err := k.ask(2 * time.Second)
		c.Close()
		if err != nil {
			t.Fatal(err)
		}
		if client != "192.0.2.2" {
			t.Errorf("%s saw the client as %s, want 192.0.2.2", backend, client)
		}
		count[backend]++
	}
	fmt.Printf("local-spread: %d new connections from one client: backend1 %d, backend2 %d, backend3 %d\n",
		n, count["backend1"], count["backend2"], count["backend3"])
	for _, b := range []string{"backend1", "backend2", "backend3"} {
		if share := float64(count[b]) / n; share < 0.20 || share > 0.47 {
			t.Errorf("%s got %.0f%% of the connections, want 20-47%%", b, 100*share)
		}
	}
}
