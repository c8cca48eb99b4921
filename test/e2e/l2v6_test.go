//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/announce"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// The dual-stack l2Lab adds IPv6 to every link: the LAN 2001:db8::/64 (where
// the IPv6 VIPs live, found by NDP), the pod network 2001:db8:100::/64.
// Duplicate address detection is off in the lab (addNS), so no address is
// ever tentative.
var lanIP6 = map[string]string{"node1": "2001:db8::11", "node2": "2001:db8::12", "node3": "2001:db8::13"}

func setupL2DualStack(t testing.TB) *l2Lab {
	d := setupL2(t)
	d.in("client", "ip", "addr", "add", "2001:db8::2/64", "dev", "eth0")
	for i, n := range []string{"node1", "node2", "node3"} {
		d.in(n, "ip", "addr", "add", lanIP6[n]+"/64", "dev", "eth0")
		d.in(n, "ip", "addr", "add", fmt.Sprintf("2001:db8:100::%d/64", i+1), "dev", "pods")
	}
	d.in("backend1", "ip", "addr", "add", "2001:db8:100::11/64", "dev", "eth0")
	d.in("backend1", "ip", "-6", "route", "add", "default", "via", "2001:db8:100::1")
	// A dual-stack node's kubelet lists an InternalIP of each family: where
	// the open connections of the IPv6 VIPs are handed back to.
	for _, n := range []string{"node1", "node2", "node3"} {
		var node corev1.Node
		ctx := context.Background()
		if err := d.env.Admin.Get(ctx, client.ObjectKey{Name: n}, &node); err != nil {
			t.Fatal(err)
		}
		node.Status.Addresses = append(node.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: lanIP6[n]})
		if err := d.env.Admin.Status().Update(ctx, &node); err != nil {
			t.Fatal(err)
		}
	}
	// NDP sockets bind the link-local address, which comes with carrier.
	for _, n := range []string{"node1", "node2", "node3"} {
		testenv.Eventually(t, settle, n+" has a link-local address", func() error {
			if !strings.Contains(d.in(n, "ip", "-6", "addr", "show", "dev", "eth0", "scope", "link"), "fe80::") {
				return fmt.Errorf("not yet")
			}
			return nil
		})
	}
	return d
}

// dualStackGroups are the LAN's two groups; the nodes' own addresses are excluded.
func (d *l2Lab) dualStackGroups(t testing.TB) {
	for _, g := range []*paasv1.IPGroup{
		{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24", ExcludedIPs: []string{"192.0.2.0/27", "192.0.2.255"}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "lan6"}, Spec: paasv1.IPGroupSpec{Segment: "2001:db8::/64", ExcludedIPs: []string{"2001:db8::/120"}}},
	} {
		if err := d.env.Admin.Create(context.Background(), g); err != nil {
			t.Fatal(err)
		}
	}
}

// dualStackService is a RequireDualStack LoadBalancer Service for backend1,
// with an EndpointSlice per family as the EndpointSlice controller writes them.
func (d *l2Lab) dualStackService(t testing.TB, name string) (vip4, vip6 string) {
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name},
		Spec: corev1.ServiceSpec{
			Type:                          corev1.ServiceTypeLoadBalancer,
			IPFamilyPolicy:                ptr.To(corev1.IPFamilyPolicyRequireDualStack),
			IPFamilies:                    []corev1.IPFamily{corev1.IPv4Protocol, corev1.IPv6Protocol},
			Ports:                         []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
			AllocateLoadBalancerNodePorts: ptr.To(false),
		},
	}
	ctx := context.Background()
	if err := d.env.Admin.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	v4 := endpointSlice("default", name, map[string]string{"198.51.100.11": "node1"})
	v6 := endpointSlice("default", name, map[string]string{"2001:db8:100::11": "node1"})
	v6.Name = name + "-v6"
	for _, es := range []*discoveryv1.EndpointSlice{v4, v6} {
		if err := d.env.Admin.Create(ctx, es); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, settle, "the Service gets a VIP per family", func() error {
		if err := d.env.Admin.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		if in := svc.Status.LoadBalancer.Ingress; len(in) != 2 {
			return fmt.Errorf("ingress %v", in)
		}
		vip4, vip6 = svc.Status.LoadBalancer.Ingress[0].IP, svc.Status.LoadBalancer.Ingress[1].IP
		return nil
	})
	return vip4, vip6
}

// vipURL is the URL of the backend behind vip, either family.
func vipURL(vip string) string {
	return "http://" + vipHostPort(vip) + "/"
}

// vipHostPort is vip's port 80 as a dial address.
func vipHostPort(vip string) string {
	return net.JoinHostPort(vip, "80")
}

// ndpAnswers solicits vip from the client, as a host resolving it does (a
// Neighbor Solicitation to its solicited-node group), and returns the distinct
// MACs of the solicited advertisements heard within a second.
func (d *l2Lab) ndpAnswers(vip string) []string {
	target := netip.MustParseAddr(vip)
	var macs []string
	_ = d.inNetns("client", func() error {
		ifi, err := net.InterfaceByName("eth0")
		if err != nil {
			return err
		}
		c, _, err := ndp.Listen(ifi, ndp.LinkLocal)
		if err != nil {
			return err
		}
		defer c.Close()
		group, err := ndp.SolicitedNodeMulticast(target)
		if err != nil {
			return err
		}
		ns := &ndp.NeighborSolicitation{TargetAddress: target,
			Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Source, Addr: ifi.HardwareAddr}}}
		if err := c.WriteTo(ns, nil, group); err != nil {
			return err
		}
		_ = c.SetReadDeadline(time.Now().Add(time.Second))
		for {
			m, _, _, err := c.ReadFrom()
			if err != nil {
				return nil // the deadline: done listening
			}
			na, ok := m.(*ndp.NeighborAdvertisement)
			if !ok || !na.Solicited || na.TargetAddress != target {
				continue
			}
			for _, o := range na.Options {
				if lla, ok := o.(*ndp.LinkLayerAddress); ok && lla.Direction == ndp.Target && !slices.Contains(macs, lla.Addr.String()) {
					macs = append(macs, lla.Addr.String())
				}
			}
		}
	})
	return macs
}

func TestL2DualStack(t *testing.T) {
	d := setupL2DualStack(t)
	ctx := context.Background()
	k8s := d.env.Admin
	top := t
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n)
	}
	d.dualStackGroups(t)
	vip4, vip6 := d.dualStackService(t, "web")
	if !netip.MustParseAddr(vip4).Is4() || !netip.MustParseAddr(vip6).Is6() {
		t.Fatalf("VIPs %s and %s, want one IPv4 and one IPv6", vip4, vip6)
	}
	owner4, owner6 := d.owner(t, vip4, ""), d.owner(t, vip6, "")
	t.Logf("%s is announced by %s, %s by %s", vip4, owner4, vip6, owner6)

	// Both VIPs lead to the backend, each with its own family end to end.
	for _, c := range []struct{ flag, vip, from string }{{"-4", vip4, "192.0.2.2"}, {"-6", vip6, "2001:db8::2"}} {
		out := d.in("client", "curl", c.flag, "-sS", "--max-time", "2", vipURL(c.vip))
		if !strings.HasPrefix(out, "backend1 ") {
			t.Fatalf("curl %s %s: %q", c.flag, vipURL(c.vip), out)
		}
	}
	// The client resolved the IPv6 VIP to its owner's MAC, and no node put it
	// on an interface (no kernel answers, no duplicate address detection).
	if mac := d.clientNeighbour(vip6); mac != d.macs[owner6] {
		t.Fatalf("client's neighbour entry for %s: %q, want %s's %s", vip6, mac, owner6, d.macs[owner6])
	}
	for n := range lanIP {
		if addrs := d.in(n, "ip", "-o", "addr"); strings.Contains(addrs, vip6+"/") {
			t.Fatalf("%s has the VIP on an interface:\n%s", n, addrs)
		}
	}
	testenv.Eventually(t, settle, "the Service says who announces each VIP", func() error {
		var svc corev1.Service
		if err := k8s.Get(ctx, client.ObjectKey{Namespace: "default", Name: "web"}, &svc); err != nil {
			return err
		}
		c := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionAnnounced)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, vip6) || !strings.Contains(c.Message, vip4) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})

	t.Run("a planned move (cordon) of the IPv6 VIP loses no request and no open connection", func(t *testing.T) {
		from := d.owner(t, vip6, "")
		l := d.curlLoop(vipURL(vip6))
		held := d.heldConnection(t, vipHostPort(vip6))
		time.Sleep(time.Second)
		d.cordon(t, from, true)
		to := d.owner(t, vip6, from)
		time.Sleep(3 * time.Second) // past the hand-over: the old owner is quiet now
		ok, failed, first := l.end()
		t.Logf("cordoned %s: %s took %s over; %d requests, %d failed", from, to, vip6, ok+failed, failed)
		if failed > 0 || ok < 20 {
			t.Fatalf("%d of %d requests failed during the move (first: %v)", failed, ok+failed, first)
		}
		if mac := d.clientNeighbour(vip6); mac != d.macs[to] {
			t.Fatalf("client's neighbour entry for %s: %q, want the new owner %s's %s", vip6, mac, to, d.macs[to])
		}
		d.cordon(t, from, false)
		d.waitAnnouncer(t, vip6, from) // rendezvous hashing gives it back
		time.Sleep(3 * time.Second)    // past that hand-over too
		if ok, failed, first := held.end(); failed > 0 || ok < 50 {
			t.Fatalf("connection open across both moves: %d of %d requests failed (first: %v)\n%s's mangle table:\n%s", failed, ok+failed, first, to, d.in(to, "ip6tables-save", "-c", "-t", "mangle"))
		}
	})

	t.Run("SIGKILL of the IPv6 owner's agent moves the IPv6 VIP within 2 s", func(t *testing.T) {
		from := d.owner(t, vip6, "")
		l := d.curlLoop(vipURL(vip6)) // keeps the client's entry in use, as real traffic does
		time.Sleep(500 * time.Millisecond)
		start := time.Now()
		_ = d.agents[from].Process.Kill()
		_ = d.agents[from].Wait()
		delete(d.agents, from)
		var took time.Duration
		for time.Since(start) < 10*time.Second {
			if mac := d.clientNeighbour(vip6); mac != "" && mac != d.macs[from] && slices.Contains(mapValues(d.macs), mac) {
				took = time.Since(start)
				break
			}
			time.Sleep(10 * time.Millisecond)
		}
		l.end()
		if took == 0 || took > 2*time.Second {
			t.Fatalf("client's neighbour entry for %s left %s after %s (0: not within 10 s), want within 2 s", vip6, from, took)
		}
		to := d.owner(t, vip6, from)
		t.Logf("killed %s's agent: the client reaches %s at %s after %s", from, vip6, to, took.Round(10*time.Millisecond))
		if out := d.in("client", "curl", "-6", "-sS", "--max-time", "2", vipURL(vip6)); !strings.HasPrefix(out, "backend1 ") {
			t.Fatalf("curl -6 after the failover: %q", out)
		}
		d.startAgent(top, from)
		d.waitAnnouncer(t, vip6, from) // rendezvous hashing gives it back
	})

	t.Run("a foreign Neighbor Advertisement raises the Conflict condition", func(t *testing.T) {
		owner := d.owner(t, vip6, "")
		foreign := net.HardwareAddr{0x02, 0, 0, 0, 0, 0xbb}
		if err := d.inNetns("client", func() error {
			ifi, err := net.InterfaceByName("eth0")
			if err != nil {
				return err
			}
			c, _, err := ndp.Listen(ifi, ndp.LinkLocal)
			if err != nil {
				return err
			}
			defer c.Close()
			na := &ndp.NeighborAdvertisement{Override: true, TargetAddress: netip.MustParseAddr(vip6),
				Options: []ndp.Option{&ndp.LinkLayerAddress{Direction: ndp.Target, Addr: foreign}}}
			return c.WriteTo(na, nil, netip.IPv6LinkLocalAllNodes())
		}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "Conflict on the ledger", func() error {
			var ip paasv1.IP
			if err := k8s.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(netip.MustParseAddr(vip6))}, &ip); err != nil {
				return err
			}
			c := meta.FindStatusCondition(ip.Status.Conditions, paasv1.IPConditionConflict)
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, owner) || !strings.Contains(c.Message, foreign.String()+" answers NDP") {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
		eventuallyEvent(t, k8s, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web"}}, announce.EventARPConflict)
	})
}
