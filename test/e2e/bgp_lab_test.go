//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// bgpLab: three nodes and a router on one dual-stack LAN (198.51.100.0/24,
// 2001:db8:1::/64), a client behind the router (203.0.113.0/25), the nodes and
// one backend (on node1) on a pod network (192.0.2.0/25). IPv4 VIPs come from
// 203.0.113.128/25, which the router reaches only through the routes the
// agents advertise to it; IPv6 VIPs from 2001:db8:100::/64.
type bgpLab struct {
	*dataLab
	router *frr
}

var (
	bgpNodeIP  = map[string]string{"node1": "198.51.100.11", "node2": "198.51.100.12", "node3": "198.51.100.13"}
	bgpNodeIP6 = map[string]string{"node1": "2001:db8:1::11", "node2": "2001:db8:1::12", "node3": "2001:db8:1::13"}
)

// frrConfig is the seed scenario's router: AS 64512, the cluster in AS 64513,
// no policy required for eBGP, any node of the LAN may peer (over IPv4 for
// IPv4 routes, over IPv6 for IPv6 ones), ECMP over them.
func frrConfig(routerID string) string { return frrConfigAS(routerID, 64512) }

// frrConfigAS is frrConfig with the router in AS asn (64513: iBGP with the cluster).
func frrConfigAS(routerID string, asn int) string {
	return `hostname router
router bgp ` + fmt.Sprint(asn) + `
 bgp router-id ` + routerID + `
 no bgp ebgp-requires-policy
 no bgp default ipv4-unicast
 neighbor nodes peer-group
 neighbor nodes remote-as 64513
 neighbor nodes timers 1 3
 bgp listen range 198.51.100.0/24 peer-group nodes
 neighbor nodes6 peer-group
 neighbor nodes6 remote-as 64513
 neighbor nodes6 timers 1 3
 bgp listen range 2001:db8:1::/64 peer-group nodes6
 address-family ipv4 unicast
  neighbor nodes activate
  maximum-paths 8
  maximum-paths ibgp 8
 exit-address-family
 address-family ipv6 unicast
  neighbor nodes6 activate
  maximum-paths 8
 exit-address-family
`
}

func setupBGP(t testing.TB) *bgpLab {
	return setupBGPRouter(t, func(l *lab) *frr { return startFRR(t, l, "router", frrConfig("198.51.100.1")) })
}

// setupBGPRouter is setupBGP with the router router starts.
func setupBGPRouter(t testing.TB, router func(*lab) *frr) *bgpLab {
	d := &bgpLab{dataLab: newDataLab(t)}
	d.addNS("sw", "router", "client", "node1", "node2", "node3", "backend1")
	for _, br := range []string{"lan", "pods", "edge"} {
		d.addBridge(br)
	}
	d.plug("router", "eth0", "lan", "198.51.100.1/24", "2001:db8:1::1/64")
	d.plug("router", "eth1", "edge", "203.0.113.1/25")
	d.plug("client", "eth0", "edge", "203.0.113.10/25")
	d.in("client", "ip", "route", "add", "default", "via", "203.0.113.1")
	for i, n := range []string{"node1", "node2", "node3"} {
		d.plug(n, "eth0", "lan", bgpNodeIP[n]+"/24", bgpNodeIP6[n]+"/64")
		d.plug(n, "pods", "pods", fmt.Sprintf("192.0.2.%d/25", i+1))
		d.in(n, "ip", "route", "add", "default", "via", "198.51.100.1")
	}
	d.plug("backend1", "eth0", "pods", "192.0.2.11/25")
	d.in("backend1", "ip", "route", "add", "default", "via", "192.0.2.1")
	serveWhoAmI(t, d.listen("backend1", ":8080"), "backend1")
	d.router = router(d.lab)
	d.startControlPlane(t, bgpNodeIP)
	return d
}

// addRouter starts another FRR router on the lab's LAN at addr (IPv4), in AS asn,
// with the seed scenario's configuration otherwise.
func (d *bgpLab) addRouter(t testing.TB, name, addr string, asn int) *frr {
	d.addNS(name)
	d.plug(name, "eth0", "lan", addr+"/24")
	return startFRR(t, d.lab, name, frrConfigAS(addr, asn))
}

// bgpService is a LoadBalancer Service for backend1 (on node1), Cluster or Local.
func (d *bgpLab) bgpService(t testing.TB, name string, local bool) *corev1.Service {
	return d.createService(t, name, local, map[string]string{"192.0.2.11": "node1"})
}

// nodesOf names the nodes behind next-hop addresses.
func nodesOf(hops []string) []string {
	var out []string
	for _, h := range hops {
		for n, ip := range bgpNodeIP {
			if ip == h || bgpNodeIP6[n] == h {
				out = append(out, n)
			}
		}
	}
	slices.Sort(out)
	return out
}

// waitNextHops waits until the router's BGP table and kernel both send vip
// to exactly nodes (none: no route), and returns how long that took.
func (d *bgpLab) waitNextHops(t testing.TB, vip string, nodes ...string) time.Duration {
	t.Helper()
	return d.router.waitNextHops(t, vip, nodes...)
}

// waitNextHops waits until this router's BGP table and kernel both send vip
// to exactly nodes (none: no route), and returns how long that took.
func (r *frr) waitNextHops(t testing.TB, vip string, nodes ...string) time.Duration {
	t.Helper()
	start := time.Now()
	slices.Sort(nodes)
	testenv.Eventually(t, settle, fmt.Sprintf("router %s routes %s to %v", r.ns, vip, nodes), func() error {
		hops, err := r.nextHops(hostRoute(vip))
		if err != nil {
			return err
		}
		if got := nodesOf(hops); !slices.Equal(got, nodes) {
			return fmt.Errorf("bgpd has next hops %v (nodes %v)", hops, got)
		}
		if got := nodesOf(r.kernelNextHops(vip)); !slices.Equal(got, nodes) {
			return fmt.Errorf("the kernel routes through %v", got)
		}
		return nil
	})
	return time.Since(start)
}

// pathMove is a span of time in which the router moved the client's path to a
// VIP from one node to another: its next hops for the VIP changed.
type pathMove struct{ from, to time.Time }

// endAcrossMoves ends l and fails t unless at least 20 requests passed and each
// failed one is a reset of the connection in flight while the router moved the
// client's path. That one is the router's limit, not the nodes': ECMP without
// resilient hashing sends the rest of an open connection to a node that never
// saw its SYN, whose conntrack picks it up mid-stream and the endpoint resets
// it (graceful restart keeps the path for a restart, see its subtest). The loop
// runs one request at a time, so at most one per move; any other failure (a
// refusal, a timeout, a reset away from a move) means a node lost a rule or a
// route too early.
func endAcrossMoves(t testing.TB, l *loop, moves ...pathMove) (ok, failed int64) {
	t.Helper()
	l.atLeast(t, 20) // on a loaded machine the loop may not have made enough yet
	ok, failed, _ = l.end()
	used := make([]bool, len(moves))
	for _, f := range l.failures {
		i := slices.IndexFunc(moves, func(m pathMove) bool { return !f.start.After(m.to) && !f.end.Before(m.from) })
		switch {
		case !strings.Contains(f.err.Error(), "exit status 56") || !strings.Contains(f.err.Error(), "reset"):
			t.Errorf("a request at %s failed, not a reset of an open connection: %v", f.start.Format("15:04:05.000"), f.err)
		case i < 0:
			t.Errorf("a request at %s was reset while the router did not move the path: %v", f.start.Format("15:04:05.000"), f.err)
		case used[i]:
			t.Errorf("a second request reset during one move of the path (%s): %v", f.start.Format("15:04:05.000"), f.err)
		default:
			used[i] = true
			t.Logf("the connection in flight while the router moved the path was reset (ECMP): %v", f.err)
		}
	}
	if ok < 20 {
		t.Errorf("%d requests passed, want at least 20", ok)
	}
	if t.Failed() {
		t.FailNow()
	}
	return ok, failed
}

// hostRoute is vip's /32, or /128 for IPv6.
func hostRoute(vip string) string {
	if strings.Contains(vip, ":") {
		return vip + "/128"
	}
	return vip + "/32"
}

// clientPath is the node the router forwards the client's traffic to vip
// through (its ECMP hash picks one per flow).
func (d *bgpLab) clientPath(t testing.TB, vip string) string {
	out := d.in("router", "ip", "route", "get", vip, "from", "203.0.113.10", "iif", "eth1")
	for n, ip := range bgpNodeIP {
		if strings.Contains(out, "via "+ip+" ") {
			return n
		}
	}
	t.Fatalf("no node in the router's path to %s: %s", vip, out)
	return ""
}

func (d *bgpLab) peerCondition(t testing.TB, typ string, status metav1.ConditionStatus, texts ...string) {
	t.Helper()
	testenv.Eventually(t, settle, fmt.Sprintf("BGPPeer router %s=%s %v", typ, status, texts), func() error {
		var p paasv1.BGPPeer
		if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: "router"}, &p); err != nil {
			return err
		}
		c := meta.FindStatusCondition(p.Status.Conditions, typ)
		if c == nil || c.Status != status {
			return fmt.Errorf("condition %+v", c)
		}
		for _, text := range texts {
			if !strings.Contains(c.Message, text) {
				return fmt.Errorf("message %q lacks %q", c.Message, text)
			}
		}
		return nil
	})
}

// noFlap: every session of the BGPPeer before is still established, since
// the same time.
func (d *bgpLab) noFlap(t testing.TB, before *paasv1.BGPPeer) {
	t.Helper()
	var after paasv1.BGPPeer
	if err := d.env.Admin.Get(context.Background(), client.ObjectKeyFromObject(before), &after); err != nil {
		t.Fatal(err)
	}
	since := map[string]*metav1.Time{}
	for _, s := range before.Status.Sessions {
		since[s.Node] = s.Since
	}
	for _, s := range after.Status.Sessions {
		if _, was := since[s.Node]; !was {
			continue // a session that came since
		}
		if s.State != paasv1.SessionEstablished || !s.Since.Equal(since[s.Node]) {
			t.Errorf("session of %s with %s: %s since %v, was since %v: it flapped", s.Node, before.Name, s.State, s.Since, since[s.Node])
		}
	}
}
