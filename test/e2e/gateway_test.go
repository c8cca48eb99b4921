//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestGatewayNeverAllocated: the nodes route through the LAN's router at
// 192.0.2.1, the lowest address of the group. Their agents publish it as
// their default gateway, so the operator never hands it out: the first
// Service gets the next free address with no probe of the router's (no IP
// object for it is ever written), one asking for it waits with the reason
// naming the gateway, and the client's neighbour entry for the router never
// changes.
func TestGatewayNeverAllocated(t *testing.T) {
	d := setupL2(t)
	d.addNS("router")
	d.plug("router", "eth0", "lan", "192.0.2.1/24")
	routerMAC := strings.TrimSpace(d.in("router", "cat", "/sys/class/net/eth0/address"))
	for _, n := range []string{"node1", "node2", "node3"} {
		d.in(n, "ip", "route", "add", "default", "via", "192.0.2.1", "dev", "eth0")
		d.startAgent(t, n)
	}
	ctx := context.Background()
	k8s := d.env.Admin
	d.in("client", "bash", "-c", "echo x > /dev/udp/192.0.2.1/9; sleep 0.3")
	watch := d.watchNeigh("192.0.2.1", routerMAC)
	testenv.Eventually(t, settle, "each agent publishes its node's default gateway", func() error {
		for _, n := range []string{"node1", "node2", "node3"} {
			var nv paasv1.NodeView
			if err := k8s.Get(ctx, client.ObjectKey{Name: n}, &nv); err != nil {
				return err
			}
			if len(nv.Spec.Interfaces) == 0 || !strings.Contains(strings.Join(nv.Spec.Interfaces[0].Gateways, ","), "192.0.2.1") {
				return fmt.Errorf("%s publishes %+v", n, nv.Spec.Interfaces)
			}
		}
		return nil
	})

	if err := k8s.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"},
		Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/28", ExcludedIPs: []string{"192.0.2.0", "192.0.2.2", "192.0.2.8/29"}}}); err != nil {
		t.Fatal(err)
	}
	first := d.lanService(t, "first", false)
	if vip := d.vipOf(t, first); vip != "192.0.2.3" {
		t.Fatalf("the first Service got %s, want 192.0.2.3 (the next after the gateway)", vip)
	}
	d.owner(t, "192.0.2.3", "")
	asks := d.lanService(t, "asks", false, paasv1.IPsAnnotation, "192.0.2.1")
	testenv.Eventually(t, settle, "the Service that asks for the gateway waits, naming it", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(asks), asks); err != nil {
			return err
		}
		c := meta.FindStatusCondition(asks.Status.Conditions, paasv1.ConditionIPAllocated)
		if c == nil || c.Reason != paasv1.ReasonRequestedIPReserved || !strings.Contains(c.Message, "the default gateway of Node node") {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	var ip paasv1.IP
	if err := k8s.Get(ctx, client.ObjectKey{Name: "192.0.2.1"}, &ip); !apierrors.IsNotFound(err) {
		t.Fatalf("the gateway's address has a ledger object (%v): %+v", err, ip.Status)
	}
	if macs := d.arpAnswers("192.0.2.1"); len(macs) != 1 || macs[0] != routerMAC {
		t.Fatalf("ARP for 192.0.2.1 answered by %v, want only the router's %s", macs, routerMAC)
	}
	if changed := watch.stop(); len(changed) > 0 {
		t.Fatalf("the client's entry for the router changed: %v", changed)
	}
}
