//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// frrUnnumberedConfig is a leaf that peers with the node on the other end of
// its link eth0 by interface: no address on either side but IPv6 link-local
// ones, any ASN but its own, IPv4 routes with IPv6 next hops (RFC 8950).
func frrUnnumberedConfig() string {
	return `hostname router
router bgp 64512
 bgp router-id 203.0.113.1
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor fabric peer-group
 neighbor fabric remote-as external
 neighbor fabric timers 1 3
 neighbor eth0 interface peer-group fabric
 address-family ipv4 unicast
  neighbor fabric activate
 exit-address-family
 address-family ipv6 unicast
  neighbor fabric activate
 exit-address-family
`
}

// TestBGPUnnumbered: node1 and the router share a link with no IPv4 address
// (eth0 on both, IPv6 link-local only). The BGPPeer names the interface;
// the session comes up over link-local addresses, the router learns the
// IPv4 VIP with node1's link-local next hop, and the client behind the
// router reaches it.
func TestBGPUnnumbered(t *testing.T) {
	d := &bgpLab{dataLab: newDataLab(t)}
	d.addNS("sw", "router", "client", "node1", "backend1")
	for _, br := range []string{"p2p", "pods", "edge"} {
		d.addBridge(br)
	}
	d.plug("router", "eth0", "p2p")
	d.plug("node1", "eth0", "p2p")
	d.plug("router", "eth1", "edge", "203.0.113.1/25")
	d.plug("client", "eth0", "edge", "203.0.113.10/25")
	d.in("client", "ip", "route", "add", "default", "via", "203.0.113.1")
	d.plug("node1", "pods", "pods", "192.0.2.1/25")
	d.plug("backend1", "eth0", "pods", "192.0.2.11/25")
	d.in("backend1", "ip", "route", "add", "default", "via", "192.0.2.1")
	serveWhoAmI(t, d.listen("backend1", ":8080"), "backend1")
	if out := d.in("node1", "ip", "-4", "addr", "show", "dev", "eth0"); strings.TrimSpace(out) != "" {
		t.Fatalf("node1's eth0 has IPv4: %s", out)
	}
	d.router = startFRR(t, d.lab, "router", frrUnnumberedConfig())
	routerLL, nodeLL := d.linkLocal(t, "router"), d.linkLocal(t, "node1")
	// The way back to the client: IPv4 through the router's IPv6 link-local
	// address, as the router reaches the VIP.
	d.in("node1", "ip", "-4", "route", "add", "default", "via", "inet6", routerLL, "dev", "eth0")
	d.startControlPlane(t, map[string]string{"node1": "192.0.2.1"})

	ctx := context.Background()
	peer := &paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: "leaf"},
		Spec: paasv1.BGPPeerSpec{Interface: "eth0", PeerASN: 64512, MyASN: 64513}}
	group := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bgp-vips"}, Spec: paasv1.IPGroupSpec{
		Segment: "203.0.113.128/25", Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}}
	for _, o := range []client.Object{peer, group} {
		if err := d.env.Admin.Create(ctx, o); err != nil {
			t.Fatal(err)
		}
	}
	start := time.Now()
	d.startAgent(t, "node1")
	vip := d.vipOf(t, d.bgpService(t, "web", false))
	testenv.Eventually(t, settle, "the router has the IPv4 VIP with node1's link-local next hop, in bgpd and the kernel", func() error {
		hops, err := d.router.nextHops(hostRoute(vip))
		if err != nil {
			return err
		}
		if !containsString(hops, nodeLL) {
			return fmt.Errorf("bgpd's next hops %v, want %s (sessions %+v; node1's neighbours %s)", hops, nodeLL, d.sessions(t, "leaf"), d.in("node1", "ip", "-6", "neigh", "show", "dev", "eth0"))
		}
		if route := d.in("router", "ip", "-4", "route", "show", vip); !strings.Contains(route, "inet6 "+nodeLL) || !strings.Contains(route, "dev eth0") {
			return fmt.Errorf("kernel route %q: want via inet6 %s dev eth0", route, nodeLL)
		}
		return nil
	})
	t.Logf("session up and %s routed through %s%%eth0 %s after the agent started", vip, nodeLL, time.Since(start).Round(time.Millisecond))
	testenv.Eventually(t, settle, "curl through the router", func() error {
		body, err := d.curl("http://" + vip + "/")
		if err == nil && !strings.HasPrefix(body, "backend1 ") {
			err = fmt.Errorf("answer %q", body)
		}
		return err
	})
	testenv.Eventually(t, settle, "the session's status", func() error {
		for _, s := range d.sessions(t, "leaf") {
			if s.Node == "node1" && s.State == paasv1.SessionEstablished && s.PrefixesSent == 1 {
				return nil
			}
		}
		return fmt.Errorf("sessions %+v", d.sessions(t, "leaf"))
	})
}

// linkLocal is the IPv6 link-local address of ns's eth0.
func (d *bgpLab) linkLocal(t testing.TB, ns string) string {
	t.Helper()
	var addr string
	testenv.Eventually(t, settle, ns+"'s link-local address", func() error {
		for _, f := range strings.Fields(d.in(ns, "ip", "-6", "-o", "addr", "show", "dev", "eth0", "scope", "link")) {
			if strings.HasPrefix(f, "fe80::") {
				addr, _, _ = strings.Cut(f, "/")
				return nil
			}
		}
		return fmt.Errorf("none yet")
	})
	return addr
}

func containsString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
