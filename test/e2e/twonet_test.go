//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// twoNetLab: nodes on two networks, as OpenShift's relocatable clusters put them.
//
//	A (lanA)  203.0.113.0/24, 2001:db8:a::/64: the nodes' InternalIPs and default routes
//	          (via .1 / ::1, which nobody holds: what leaves by A is lost)
//	B (lanB)  192.0.2.0/24, 2001:db8:b::/64: the VIP groups; the router at .1 / ::1
//	outside   198.51.100.128/25, 2001:db8:c::/64: the client, behind the router
//	pods      198.51.100.0/25, 2001:db8:d::/64: backend1, on node1
//
// Strict rp_filter on the nodes: a request from the client arriving on B is
// dropped unless the node's way back to the client is B too.
type twoNetLab struct{ *l2Lab }

var twoNetNodes = []string{"node1", "node2"}

func setupTwoNetworks(t *testing.T) *twoNetLab {
	d := &twoNetLab{&l2Lab{dataLab: newDataLab(t), macs: map[string]string{}}}
	d.addNS("sw", "client", "router", "node1", "node2", "backend1")
	for _, br := range []string{"lanA", "lanB", "outside", "pods"} {
		d.addBridge(br)
	}
	d.plug("router", "eth0", "lanB", "192.0.2.1/24", "2001:db8:b::1/64")
	d.plug("router", "eth1", "outside", "198.51.100.129/25", "2001:db8:c::1/64")
	d.plug("client", "eth0", "outside", "198.51.100.130/25", "2001:db8:c::130/64")
	d.in("client", "ip", "route", "add", "default", "via", "198.51.100.129")
	d.in("client", "ip", "-6", "route", "add", "default", "via", "2001:db8:c::1")
	internal := map[string]string{}
	for i, n := range twoNetNodes {
		d.in(n, "sysctl", "-qw", "net.ipv4.conf.all.rp_filter=1", "net.ipv4.conf.default.rp_filter=1")
		internal[n] = fmt.Sprintf("203.0.113.%d", 11+i)
		d.plug(n, "eth0", "lanA", internal[n]+"/24", fmt.Sprintf("2001:db8:a::%d/64", 11+i))
		d.plug(n, "eth1", "lanB", fmt.Sprintf("192.0.2.%d/24", 11+i), fmt.Sprintf("2001:db8:b::%d/64", 11+i))
		d.plug(n, "pods", "pods", fmt.Sprintf("198.51.100.%d/25", 1+i), fmt.Sprintf("2001:db8:d::%d/64", 1+i))
		d.in(n, "ip", "route", "add", "default", "via", "203.0.113.1")
		d.in(n, "ip", "-6", "route", "add", "default", "via", "2001:db8:a::1")
		d.macs[n] = strings.TrimSpace(d.in(n, "cat", "/sys/class/net/eth1/address"))
	}
	d.plug("backend1", "eth0", "pods", "198.51.100.11/25", "2001:db8:d::11/64")
	d.in("backend1", "ip", "route", "add", "default", "via", "198.51.100.1")
	d.in("backend1", "ip", "-6", "route", "add", "default", "via", "2001:db8:d::1")
	serveWhoAmI(t, d.listen("backend1", ":8080"), "backend1")
	d.startControlPlane(t, internal)
	for _, g := range []*paasv1.IPGroup{
		{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24",
			ExcludedIPs: []string{"192.0.2.0/27", "192.0.2.255"},
			Announce:    &paasv1.Announce{Gateway: &paasv1.Gateway{IPv4: "192.0.2.1"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "b6"}, Spec: paasv1.IPGroupSpec{Segment: "2001:db8:b::/64",
			ExcludedIPs: []string{"2001:db8:b::/120"},
			Announce:    &paasv1.Announce{Gateway: &paasv1.Gateway{IPv6: "2001:db8:b::1"}}}},
	} {
		if err := d.env.Admin.Create(context.Background(), g); err != nil {
			t.Fatal(err)
		}
	}
	return d
}

// startAgents (re)starts the agents of both nodes with args.
func (d *twoNetLab) startAgents(t *testing.T, args ...string) {
	for _, n := range twoNetNodes {
		d.stopAgent(n)
		d.startAgent(t, n, args...)
	}
	d.waitDataPlanes(t, twoNetNodes...)
}

// service creates a Service of backend1 in group (b or b6, its family) and waits
// until a node announces its VIP.
func (d *twoNetLab) service(t *testing.T, name, group string, local bool) (vip, owner string) {
	fam, backend := corev1.IPv4Protocol, "198.51.100.11"
	if group == "b6" {
		fam, backend = corev1.IPv6Protocol, "2001:db8:d::11"
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, Annotations: map[string]string{paasv1.IPGroupAnnotation: group}},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			IPFamilies:                    []corev1.IPFamily{fam},
			Ports:                         []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
			AllocateLoadBalancerNodePorts: ptr.To(false),
		},
	}
	if local {
		svc.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
	}
	es := endpointSlice("default", name, map[string]string{backend: "node1"})
	ctx := context.Background()
	if err := d.env.Admin.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	if err := d.env.Admin.Create(ctx, es); err != nil {
		t.Fatal(err)
	}
	vip = d.vipOf(t, svc)
	testenv.Eventually(t, settle, "a node announces "+vip, func() error {
		if owner = d.announcer(vip); owner == "" {
			return fmt.Errorf("nobody yet")
		}
		return nil
	})
	return vip, owner
}

// mainTables is both families' main routing table of every node.
func (d *twoNetLab) mainTables() string {
	var b strings.Builder
	for _, n := range twoNetNodes {
		b.WriteString(d.in(n, "ip", "-4", "route", "show", "table", "main"))
		b.WriteString(d.in(n, "ip", "-6", "route", "show", "table", "main"))
	}
	return b.String()
}

func TestTwoNetworks(t *testing.T) {
	for _, plane := range []string{"nftables", "iptables"} {
		t.Run(plane, func(t *testing.T) { testTwoNetworks(t, plane) })
	}
}

func testTwoNetworks(t *testing.T, plane string) {
	d := setupTwoNetworks(t)
	before := d.mainTables()
	d.startAgents(t, "--dataplane", plane, "--return-paths=false")
	vip, _ := d.service(t, "web", "b", false)
	vip6, _ := d.service(t, "web6", "b6", true)
	t.Run("without return paths the reply is lost", func(t *testing.T) {
		time.Sleep(2 * time.Second) // the rules are in place: it is the way back that fails
		for _, v := range []string{vip, vip6} {
			if body, err := d.curl(vipURL(v)); err == nil {
				t.Fatalf("curl through %s without return paths: %q, want a failure", v, body)
			}
		}
	})
	d.startAgents(t, "--dataplane", plane)
	testenv.Eventually(t, settle, "IPGroup b says its nodes have a way back", func() error {
		var g paasv1.IPGroup
		if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: "b"}, &g); err != nil {
			return err
		}
		if c := meta.FindStatusCondition(g.Status.Conditions, paasv1.IPGroupReturnPath); c == nil || c.Reason != paasv1.ReasonRouterKnown || !strings.Contains(c.Message, "2 node(s)") {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	for _, tc := range []struct {
		name, group string
		local       bool
	}{{"IPv4 Cluster", "b", false}, {"IPv4 Local", "b", true}, {"IPv6 Cluster", "b6", false}, {"IPv6 Local", "b6", true}} {
		t.Run(tc.name, func(t *testing.T) {
			name := strings.ToLower(strings.ReplaceAll(tc.name, " ", "-"))
			vip, owner := d.service(t, name, tc.group, tc.local)
			testenv.Eventually(t, settle, "curl from behind the router through "+vip, func() error {
				body, err := d.curl(vipURL(vip))
				if err == nil && !strings.HasPrefix(body, "backend1 ") {
					err = fmt.Errorf("answered by %q", body)
				}
				return err
			})
			if tc.local && owner != "node1" {
				t.Fatalf("Local Service announced by %s, its only endpoint is on node1", owner)
			}
		})
	}
	// The strict reverse-path filter honours the mark on eth1 only: the agent set it there
	// (through netlink), nowhere else.
	for _, n := range twoNetNodes {
		for conf, want := range map[string]string{"all": "0", "eth0": "0", "eth1": "1"} {
			if v := strings.TrimSpace(d.in(n, "cat", "/proc/sys/net/ipv4/conf/"+conf+"/src_valid_mark")); v != want {
				t.Fatalf("%s: net.ipv4.conf.%s.src_valid_mark is %s, want %s", n, conf, v, want)
			}
		}
	}
	t.Run("a planned move keeps the open connection", func(t *testing.T) {
		from := d.announcer(vip)
		held := d.heldConnection(t, vipHostPort(vip))
		time.Sleep(time.Second)
		d.cordon(t, from, true)
		d.waitAnnouncer(t, vip, other(from))
		time.Sleep(3 * time.Second)
		if body, err := d.curl(vipURL(vip)); err != nil {
			t.Fatalf("a new connection after the move: %q, %v", body, err)
		}
		d.cordon(t, from, false)
		d.waitAnnouncer(t, vip, from)
		time.Sleep(3 * time.Second)
		if ok, failed, first := held.end(); failed > 0 || ok < 100 {
			t.Fatalf("connection open across both moves: %d of %d requests failed (first: %v)", failed, ok+failed, first)
		}
	})
	t.Run("failover keeps new connections working", func(t *testing.T) {
		from := d.announcer(vip)
		_ = d.agents[from].Process.Kill()
		_ = d.agents[from].Wait()
		delete(d.agents, from)
		d.untilAnnouncedElsewhere(t, vip, from, time.Now())
		testenv.Eventually(t, settle, "curl through "+vip+" after the failover", func() error { _, err := d.curl(vipURL(vip)); return err })
		d.startAgent(t, from, "--dataplane", plane)
	})
	// Renumbering changes the main tables' connected routes: compared before.
	if after := d.mainTables(); after != before {
		t.Fatalf("the main tables changed:\nbefore:\n%s\nafter:\n%s", before, after)
	}
	t.Run("the external network renumbered: the router and the nodes' addresses on B", func(t *testing.T) {
		// Deleting an interface's primary address deletes its secondaries too: delete first.
		d.in("router", "ip", "addr", "del", "192.0.2.1/24", "dev", "eth0")
		d.in("router", "ip", "addr", "add", "192.0.2.30/24", "dev", "eth0")
		for i, n := range twoNetNodes {
			d.in(n, "ip", "addr", "del", fmt.Sprintf("192.0.2.%d/24", 11+i), "dev", "eth1")
			d.in(n, "ip", "addr", "add", fmt.Sprintf("192.0.2.%d/24", 21+i), "dev", "eth1")
		}
		var g paasv1.IPGroup
		if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: "b"}, &g); err != nil {
			t.Fatal(err)
		}
		g.Spec.Announce.Gateway.IPv4 = "192.0.2.30"
		if err := d.env.Admin.Update(context.Background(), &g); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "curl through "+vip+" on the renumbered network", func() error { _, err := d.curl(vipURL(vip)); return err })
		owner := d.announcer(vip)
		if route := d.in(owner, "ip", "route", "show", "table", "5301"); !strings.HasPrefix(route, "default via 192.0.2.30 dev eth1") {
			t.Fatalf("%s's way back after the renumbering: %s", owner, route)
		}
	})
	// What docs/announcement.md shows.
	t.Logf("node1's policy rules:\n%s\n%s\nnode1's table 5301:\n%s\n%s\nnode1's VIPA-RETURN:\n%s\n%s", d.in("node1", "ip", "-4", "rule"), d.in("node1", "ip", "-6", "rule"),
		d.in("node1", "ip", "-4", "route", "show", "table", "5301"), d.in("node1", "ip", "-6", "route", "show", "table", "5301"),
		d.in("node1", "nft", "list", "chain", "ip", "mangle", "VIPA-RETURN"), d.in("node1", "nft", "list", "chain", "ip6", "mangle", "VIPA-RETURN"))
	t.Run("agent cleanup removes the rules and tables", func(t *testing.T) {
		for _, n := range twoNetNodes {
			d.stopAgent(n)
			out, err := exec.Command("ip", "netns", "exec", d.ns(n), binary(d.root), "agent", "cleanup").CombinedOutput()
			if err != nil {
				t.Fatalf("%s: agent cleanup: %v: %s", n, err, out)
			}
			for _, fam := range []string{"-4", "-6"} {
				if rules := d.in(n, "ip", fam, "rule"); strings.Contains(rules, "5301") || strings.Contains(rules, "31000") {
					t.Fatalf("%s keeps our rules after cleanup:\n%s", n, rules)
				}
				if routes := d.in(n, "ip", fam, "route", "show", "table", "5301"); strings.TrimSpace(routes) != "" {
					t.Fatalf("%s keeps table 5301 after cleanup:\n%s", n, routes)
				}
			}
			if dump := d.iptablesSave(n); strings.Contains(dump, "VIPA-RETURN") {
				t.Fatalf("%s keeps VIPA-RETURN after cleanup:\n%s", n, dump)
			}
		}
	})
}

func other(node string) string {
	if node == "node1" {
		return "node2"
	}
	return "node1"
}

// TestOneNetworkUnchanged: on nodes with one network, which carries the VIPs and the
// default route, the agent writes exactly the rules, policy rules and routes it wrote
// without return paths.
func TestOneNetworkUnchanged(t *testing.T) {
	for _, plane := range []string{"nftables", "iptables"} {
		t.Run(plane, func(t *testing.T) {
			d := setupL2(t)
			for n := range lanIP {
				d.in(n, "ip", "route", "add", "default", "via", "192.0.2.1")
			}
			if err := d.env.Admin.Create(context.Background(), &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"},
				Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24", ExcludedIPs: []string{"192.0.2.0/27", "192.0.2.255"},
					Announce: &paasv1.Announce{Gateway: &paasv1.Gateway{IPv4: "192.0.2.1"}}}}); err != nil {
				t.Fatal(err)
			}
			vip := d.vipOf(t, d.lanService(t, "web", false))
			state := func(args ...string) string {
				d.startAgent(t, "node1", append([]string{"--dataplane", plane}, args...)...)
				d.waitDataPlanes(t, "node1")
				testenv.Eventually(t, settle, "node1 programs "+vip, func() error {
					if dump := d.ruleset("node1"); !strings.Contains(dump, vip) {
						return fmt.Errorf("not yet")
					}
					return nil
				})
				time.Sleep(time.Second) // a few check periods: the return paths are decided too
				s := d.ruleset("node1") + d.in("node1", "ip", "-4", "rule") + d.in("node1", "ip", "-6", "rule") +
					d.in("node1", "ip", "-4", "route", "show", "table", "all") + d.in("node1", "ip", "-6", "route", "show", "table", "all")
				d.stopAgent("node1")
				if out, err := exec.Command("ip", "netns", "exec", d.ns("node1"), binary(d.root), "agent", "cleanup").CombinedOutput(); err != nil {
					t.Fatalf("agent cleanup: %v: %s", err, out)
				}
				return s
			}
			// The first run creates iptables-nft's built-in chains, which outlive cleanup and
			// change the order nft lists chains in: compare the runs after it.
			state("--return-paths=false")
			without := state("--return-paths=false")
			if with := state(); with != without {
				t.Fatalf("with return paths:\n%s\nwithout:\n%s", with, without)
			}
		})
	}
}
