//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"os/exec"
	"strings"
	"sync"
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

// TestProbeBeforeFirstAnnouncement: the LAN's router has 192.0.2.1, the
// lowest address of the group. The first Service is never announced there:
// the node that owns the address probes it first, the router answers, and the
// Service moves to the next free address; the client's neighbour entry for
// the router never changes. A Service that asks for 192.0.2.1 waits, and its
// condition names the router's MAC. Once the router gives the address up, a
// recheck clears the verdict and the waiting Service gets and announces it.
func TestProbeBeforeFirstAnnouncement(t *testing.T) {
	d := setupL2(t)
	d.addNS("router")
	d.plug("router", "eth0", "lan", "192.0.2.1/24")
	routerMAC := strings.TrimSpace(d.in("router", "cat", "/sys/class/net/eth0/address"))
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n, "--new-address-recheck", "3s")
	}
	ctx := context.Background()
	k8s := d.env.Admin

	// The client talks to its router: its entry for 192.0.2.1 is the router's.
	d.in("client", "bash", "-c", "echo x > /dev/udp/192.0.2.1/9; sleep 0.3")
	before := d.neigh("192.0.2.1")
	if !strings.Contains(before, routerMAC) {
		t.Fatalf("client's entry for the router: %q, want its MAC %s", before, routerMAC)
	}
	// Watch it through the whole test: it must never name another MAC.
	watch := d.watchNeigh("192.0.2.1", routerMAC)

	// .0 and .2 (the client) are no one's to hand out, nor .8/29 (the nodes).
	if err := k8s.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"},
		Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/28", ExcludedIPs: []string{"192.0.2.0", "192.0.2.2", "192.0.2.8/29"}}}); err != nil {
		t.Fatal(err)
	}
	first := d.lanService(t, "first", false)
	testenv.Eventually(t, settle, "the router's address is recorded in use on the LAN", func() error {
		var ip paasv1.IP
		if err := k8s.Get(ctx, client.ObjectKey{Name: "192.0.2.1"}, &ip); err != nil {
			return err
		}
		c, inUse := ip.InUseOnLAN()
		if !inUse || !strings.Contains(c.Message, routerMAC) {
			return fmt.Errorf("conditions %+v, announced by %v", ip.Status.Conditions, ip.Status.AnnouncedBy)
		}
		return nil
	})
	testenv.Eventually(t, settle, "the first Service moves to the next free address", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(first), first); err != nil {
			return err
		}
		if in := first.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "192.0.2.3" {
			return fmt.Errorf("ingress %v", in)
		}
		return nil
	})
	owner := d.owner(t, "192.0.2.3", "")
	t.Logf("192.0.2.3 is announced by %s", owner)
	eventuallyEvent(t, k8s, first, "AddressInUseOnLAN")
	if body, err := d.curl("http://192.0.2.3/"); err != nil || !strings.HasPrefix(body, "backend1 ") {
		t.Fatalf("curl through the new address: %q, %v", body, err)
	}
	// No node ever answered for the router's address.
	if macs := d.arpAnswers("192.0.2.1"); len(macs) != 1 || macs[0] != routerMAC {
		t.Fatalf("ARP for 192.0.2.1 answered by %v, want only the router's %s", macs, routerMAC)
	}

	asks := d.lanService(t, "asks", false, paasv1.IPsAnnotation, "192.0.2.1")
	testenv.Eventually(t, settle, "the Service that asks for the router's address waits, naming its MAC", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(asks), asks); err != nil {
			return err
		}
		c := meta.FindStatusCondition(asks.Status.Conditions, paasv1.ConditionIPAllocated)
		if c == nil || c.Status != metav1.ConditionFalse || c.Reason != paasv1.ReasonRequestedIPInUseOnLAN || !strings.Contains(c.Message, routerMAC) {
			return fmt.Errorf("condition %+v", c)
		}
		if len(asks.Status.LoadBalancer.Ingress) != 0 {
			return fmt.Errorf("ingress %v while waiting", asks.Status.LoadBalancer.Ingress)
		}
		return nil
	})
	// A second Service gets neither the router's address nor the first's.
	second := d.lanService(t, "second", false)
	if vip := d.vipOf(t, second); vip != "192.0.2.4" {
		t.Fatalf("the second Service got %s, want 192.0.2.4", vip)
	}

	if changed := watch.stop(); len(changed) > 0 {
		t.Fatalf("the client's entry for the router changed: %v", changed)
	}
	if after := d.neigh("192.0.2.1"); !strings.Contains(after, routerMAC) {
		t.Fatalf("client's entry for the router after: %q, before: %q", after, before)
	}

	t.Run("the router gives the address up: a recheck clears the verdict, and the waiting Service gets it", func(t *testing.T) {
		d.in("router", "ip", "addr", "del", "192.0.2.1/24", "dev", "eth0")
		d.in("client", "ip", "neigh", "flush", "192.0.2.1")
		testenv.Eventually(t, settle, "the waiting Service holds 192.0.2.1", func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(asks), asks); err != nil {
				return err
			}
			if in := asks.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "192.0.2.1" {
				return fmt.Errorf("ingress %v, conditions %+v", in, asks.Status.Conditions)
			}
			return nil
		})
		d.owner(t, "192.0.2.1", "")
		if first.Status.LoadBalancer.Ingress[0].IP != "192.0.2.3" {
			t.Fatalf("the first Service moved again: %v", first.Status.LoadBalancer.Ingress)
		}
	})
}

// TestProbeBeforeFirstAnnouncementIPv6: the same for IPv6, by duplicate
// address detection: the router has 2001:db8::1, the first Service is never
// announced there and gets the next free address, and the client's entry for
// the router never changes.
func TestProbeBeforeFirstAnnouncementIPv6(t *testing.T) {
	d := setupL2DualStack(t)
	d.addNS("router")
	d.plug("router", "eth0", "lan", "2001:db8::1/64")
	routerMAC := strings.TrimSpace(d.in("router", "cat", "/sys/class/net/eth0/address"))
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n)
	}
	ctx := context.Background()
	k8s := d.env.Admin
	testenv.Eventually(t, settle, "the client resolves its router", func() error {
		_, _ = exec.Command("ip", "netns", "exec", d.ns("client"), "bash", "-c", "echo x > /dev/udp/2001:db8::1/9").CombinedOutput()
		if n := d.neigh("2001:db8::1"); !strings.Contains(n, routerMAC) {
			return fmt.Errorf("client's entry for the router: %q, want its MAC %s", n, routerMAC)
		}
		return nil
	})
	watch := d.watchNeigh("2001:db8::1", routerMAC)

	// ::2 is the client's, ::8/125 the nodes'.
	if err := k8s.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan6"},
		Spec: paasv1.IPGroupSpec{Segment: "2001:db8::/124", ExcludedIPs: []string{"2001:db8::", "2001:db8::2", "2001:db8::8/125"}}}); err != nil {
		t.Fatal(err)
	}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "first6"},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, IPFamilies: []corev1.IPFamily{corev1.IPv6Protocol},
			Ports:                         []corev1.ServicePort{{Name: "http", Port: 80, TargetPort: intstr.FromString("http")}},
			AllocateLoadBalancerNodePorts: ptr.To(false)},
	}
	if err := k8s.Create(ctx, svc); err != nil {
		t.Fatal(err)
	}
	es := endpointSlice("default", "first6", map[string]string{"2001:db8:100::11": "node1"})
	if err := k8s.Create(ctx, es); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, "the first Service moves off the router's address", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
			return err
		}
		if in := svc.Status.LoadBalancer.Ingress; len(in) != 1 || in[0].IP != "2001:db8::3" {
			return fmt.Errorf("ingress %v", in)
		}
		return nil
	})
	var ip paasv1.IP
	if err := k8s.Get(ctx, client.ObjectKey{Name: "2001-db8--1"}, &ip); err != nil {
		t.Fatal(err)
	}
	if c, inUse := ip.InUseOnLAN(); !inUse || !strings.Contains(c.Message, routerMAC) || !strings.Contains(c.Message, "NDP") {
		t.Fatalf("the router's address: conditions %+v, announced by %v", ip.Status.Conditions, ip.Status.AnnouncedBy)
	}
	d.owner(t, "2001:db8::3", "")
	if body, err := d.curl(vipURL("2001:db8::3")); err != nil || !strings.HasPrefix(body, "backend1 ") {
		t.Fatalf("curl through the new address: %q, %v", body, err)
	}
	if changed := watch.stop(); len(changed) > 0 {
		t.Fatalf("the client's entry for the router changed: %v", changed)
	}
}

// neigh is the client's neighbour entry for addr on its LAN interface.
func (d *l2Lab) neigh(addr string) string {
	return strings.ToLower(strings.TrimSpace(d.in("client", "ip", "neigh", "show", addr, "dev", "eth0")))
}

// neighWatch samples the client's neighbour entry for an address every 50 ms.
type neighWatch struct {
	done    chan struct{}
	wg      sync.WaitGroup
	mu      sync.Mutex
	changed []string
}

// watchNeigh records every entry of the client's for addr that names a MAC
// other than want.
func (d *l2Lab) watchNeigh(addr, want string) *neighWatch {
	w := &neighWatch{done: make(chan struct{})}
	ns := d.ns("client")
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		for {
			select {
			case <-w.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			b, err := exec.Command("ip", "netns", "exec", ns, "ip", "neigh", "show", addr, "dev", "eth0").Output()
			if err != nil {
				continue
			}
			out := string(b)
			if f := strings.Fields(strings.ToLower(out)); len(f) >= 3 && f[1] == "lladdr" && f[2] != want {
				w.mu.Lock()
				w.changed = append(w.changed, time.Now().Format("15:04:05.000")+" "+strings.TrimSpace(out))
				w.mu.Unlock()
			}
		}
	}()
	return w
}

func (w *neighWatch) stop() []string {
	close(w.done)
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.changed
}
