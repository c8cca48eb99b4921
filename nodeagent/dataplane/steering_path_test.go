//go:build root

package dataplane

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/netip"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
)

// TestSteeringDataPath checks the two stages against the kernel, with the nftables plane of
// three nodes and no agent: a client and the nodes on one LAN (192.0.2.0/24), each node with
// one backend behind a link of its own (so a node can only serve with its own endpoint). The
// client reaches the VIP by node1 (a static neighbour entry stands for node1's ARP answers).
// Connections spread over the three backends, which see the client's own address; then
// node1's LAN link goes down and the client's entry names node2, as at a failover: every
// connection served by node2 or node3 goes on, since node2 steers each flow where node1 did
// and the serving nodes' conntrack never changed.
func TestSteeringDataPath(t *testing.T) {
	for _, fam := range []Family{IPv4, IPv6} {
		t.Run(string(fam), func(t *testing.T) { testSteeringDataPath(t, fam) })
	}
}

// pathAddrs are the steering lab's addresses of one family.
type pathAddrs struct {
	vip, client, bits string
	lan               func(i int) string    // node i's LAN address (1-3)
	pod               func(i int) [2]string // node i's end and its backend's of their link, with prefix
}

var pathFamilies = map[Family]pathAddrs{
	IPv4: {vip: "192.0.2.100", client: "192.0.2.2", bits: "/24",
		lan: func(i int) string { return fmt.Sprintf("192.0.2.1%d", i) },
		pod: func(i int) [2]string {
			return [2]string{fmt.Sprintf("198.51.100.%d/28", 16*i+1), fmt.Sprintf("198.51.100.%d/28", 16*i+2)}
		}},
	IPv6: {vip: "2001:db8::100", client: "2001:db8::2", bits: "/64",
		lan: func(i int) string { return fmt.Sprintf("2001:db8::1%d", i) },
		pod: func(i int) [2]string {
			return [2]string{fmt.Sprintf("2001:db8:1:%d::1/64", i), fmt.Sprintf("2001:db8:1:%d::2/64", i)}
		}},
}

func testSteeringDataPath(t *testing.T, fam Family) {
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create network namespaces (make test runs as root)")
	}
	a := pathFamilies[fam]
	vip := a.vip
	ns := map[string]string{}
	for _, n := range []string{"sw", "client", "node1", "node2", "node3", "backend1", "backend2", "backend3"} {
		ns[n] = netnstest.AddPeer(t, "vipa-steer-"+n)
		netnstest.RunIn(t, ns[n], "ip", "link", "set", "lo", "up")
		netnstest.NoDAD(t, ns[n])
	}
	in := func(n string, args ...string) string { return netnstest.RunIn(t, ns[n], args...) }
	in("sw", "ip", "link", "add", "br0", "type", "bridge")
	in("sw", "ip", "link", "set", "br0", "up")
	plug := func(n, addr string) {
		in("sw", "ip", "link", "add", "to-"+n, "type", "veth", "peer", "name", "eth0", "netns", ns[n])
		in("sw", "ip", "link", "set", "to-"+n, "master", "br0", "up")
		in(n, "ip", "addr", "add", addr, "dev", "eth0")
		in(n, "ip", "link", "set", "eth0", "up")
	}
	plug("client", a.client+a.bits)
	peers := map[string]netip.Addr{}
	macs := map[string]string{}
	svc := Service{Namespace: "default", Name: "web", VIPs: addrs(vip), Ports: []Port{{Name: "http", Protocol: TCP, Port: 80}, {Name: "dns", Protocol: UDP, Port: 53}}, Steer: true}
	for i, n := range []string{"node1", "node2", "node3"} {
		lan := a.lan(i + 1)
		plug(n, lan+a.bits)
		peers[n] = netip.MustParseAddr(lan)
		macs[n] = strings.TrimSpace(in(n, "cat", "/sys/class/net/eth0/address"))
		in(n, "sysctl", "-qw", "net.ipv4.ip_forward=1", "net.ipv6.conf.all.forwarding=1")
		// The node's own link to its backend.
		b := fmt.Sprintf("backend%d", i+1)
		pod := a.pod(i + 1)
		gw, addr := strings.Split(pod[0], "/")[0], strings.Split(pod[1], "/")[0]
		in(n, "ip", "link", "add", "pod0", "type", "veth", "peer", "name", "eth0", "netns", ns[b])
		in(n, "ip", "addr", "add", pod[0], "dev", "pod0")
		in(n, "ip", "link", "set", "pod0", "up")
		in(b, "ip", "addr", "add", pod[1], "dev", "eth0")
		in(b, "ip", "link", "set", "eth0", "up")
		in(b, "ip", "route", "add", "default", "via", gw)
		serveName(t, ns[b], b)
		serveUDPName(t, ns[b], b)
		e := ep(addr, false, "http/8080", "dns/UDP/5353")
		e.Node = n
		svc.Endpoints = append(svc.Endpoints, e)
	}
	for _, n := range []string{"node1", "node2", "node3"} {
		if err := netnstest.Do(ns[n], func() error {
			p, err := NewNFTables(Config{Family: fam})
			if err != nil {
				return err
			}
			if err := p.SetSteering(Steering{Node: n, Peers: peers}); err != nil {
				return err
			}
			s := svc
			s.Endpoints = nil
			for _, e := range svc.Endpoints {
				e.Local = e.Node == n
				s.Endpoints = append(s.Endpoints, e)
			}
			_, err = p.Sync([]Service{s}, false)
			return err
		}); err != nil {
			t.Fatalf("%s: %v", n, err)
		}
	}
	owns := func(n string) {
		in("client", "ip", "neigh", "replace", vip, "lladdr", macs[n], "dev", "eth0", "nud", "permanent")
	}
	owns("node1")

	type conn struct {
		c       net.Conn
		r       *bufio.Reader
		backend string
	}
	ask := func(c *conn, timeout time.Duration) (backend, client string, err error) {
		_ = c.c.SetDeadline(time.Now().Add(timeout))
		if _, err := io.WriteString(c.c, "GET / HTTP/1.1\r\nHost: vip\r\n\r\n"); err != nil {
			return "", "", err
		}
		resp, err := http.ReadResponse(c.r, nil)
		if err != nil {
			return "", "", err
		}
		body, err := io.ReadAll(resp.Body)
		resp.Body.Close()
		if f := strings.Fields(string(body)); err == nil && len(f) == 2 {
			return f[0], f[1], nil
		}
		return "", "", fmt.Errorf("answer %q: %v", body, err)
	}
	var conns []*conn
	count := map[string]int{}
	for range 60 {
		c := &conn{}
		if err := netnstest.Do(ns["client"], func() (err error) {
			c.c, err = net.DialTimeout("tcp", net.JoinHostPort(vip, "80"), 2*time.Second)
			return err
		}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { c.c.Close() })
		c.r = bufio.NewReader(c.c)
		backend, client, err := ask(c, 2*time.Second)
		if err != nil {
			t.Fatalf("a new connection through node1: %v", err)
		}
		if client != a.client {
			t.Errorf("%s saw the client as %s: not its own address", backend, client)
		}
		c.backend = backend
		count[backend]++
		conns = append(conns, c)
	}
	for _, b := range []string{"backend1", "backend2", "backend3"} {
		if count[b] < 60/10 {
			t.Errorf("60 connections entering by node1 spread %v: %s serves (almost) none", count, b)
		}
	}

	// UDP flows (a socket each) are steered alike; a flow's datagrams all reach one backend.
	var flows []*udpFlow
	udpSeen := map[string]bool{}
	for range 30 {
		f := openUDP(t, ns["client"], net.JoinHostPort(vip, "53"))
		backend, err := f.ask()
		if err != nil {
			t.Fatalf("a UDP flow through node1: %v", err)
		}
		f.backend = backend
		udpSeen[backend] = true
		flows = append(flows, f)
	}
	if len(udpSeen) != 3 {
		t.Errorf("30 UDP flows reached %v, want all three backends", udpSeen)
	}

	in("node1", "ip", "link", "set", "eth0", "down")
	owns("node2")
	for _, f := range flows {
		if f.backend == "backend1" {
			continue
		}
		if backend, err := f.ask(); err != nil || backend != f.backend {
			t.Errorf("a UDP flow served by %s went to %q after node2 took over: %v", f.backend, backend, err)
		}
	}
	kept, lost := 0, 0
	for _, c := range conns {
		backend, _, err := ask(c, 3*time.Second)
		switch {
		case c.backend == "backend1":
			lost++ // its serving node is cut off
		case err != nil || backend != c.backend:
			t.Errorf("a connection served by %s broke when node2 took over: %q %v", c.backend, backend, err)
		default:
			kept++
		}
	}
	t.Logf("kept %d of %d connections; %d served by node1, cut off", kept, len(conns), lost)
}

// serveName serves HTTP on :8080 in namespace ns, answering each request with name and the
// client's address.
func serveName(t *testing.T, ns, name string) {
	var ln net.Listener
	if err := netnstest.Do(ns, func() (err error) {
		ln, err = net.Listen("tcp", ":8080")
		return err
	}); err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		host, _, _ := net.SplitHostPort(r.RemoteAddr)
		fmt.Fprintf(w, "%s %s\n", name, host)
	})}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
}

// serveUDPName answers every datagram on :5353 in namespace ns with name and the sender's
// address.
func serveUDPName(t *testing.T, ns, name string) {
	var pc net.PacketConn
	if err := netnstest.Do(ns, func() (err error) {
		pc, err = net.ListenPacket("udp", ":5353")
		return err
	}); err != nil {
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
			host, _, _ := net.SplitHostPort(from.String())
			_, _ = pc.WriteTo([]byte(name+" "+host), from)
		}
	}()
}

// udpFlow is one UDP socket of the client's, connected to the VIP: one flow.
type udpFlow struct {
	c       net.Conn
	backend string
}

func openUDP(t *testing.T, ns, hostport string) *udpFlow {
	f := &udpFlow{}
	if err := netnstest.Do(ns, func() (err error) {
		f.c, err = net.Dial("udp", hostport)
		return err
	}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.c.Close() })
	return f
}

// ask sends a datagram and returns the backend that answered (a few tries: UDP may drop one).
func (f *udpFlow) ask() (string, error) {
	var err error
	for range 3 {
		_ = f.c.SetDeadline(time.Now().Add(time.Second))
		if _, err = f.c.Write([]byte("who")); err != nil {
			continue
		}
		buf := make([]byte, 512)
		var n int
		if n, err = f.c.Read(buf); err == nil {
			return strings.Fields(string(buf[:n]))[0], nil
		}
	}
	return "", err
}
