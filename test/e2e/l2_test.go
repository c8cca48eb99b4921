//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/announce"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

func TestL2Announcement(t *testing.T) {
	d, web, vip, _ := announcedLab(t)
	ctx := context.Background()
	k8s := d.env.Admin
	top := t // agents (re)started in subtests live as long as the whole test
	if body, err := d.curl("http://" + vip + "/"); err != nil || !strings.HasPrefix(body, "backend1 ") {
		t.Fatalf("curl through the VIP: %q, %v", body, err)
	}
	// The VIP is on no interface of any node.
	for n := range lanIP {
		if addrs := d.in(n, "ip", "-o", "addr"); strings.Contains(addrs, vip+"/") {
			t.Fatalf("%s has the VIP on an interface:\n%s", n, addrs)
		}
	}
	testenv.Eventually(t, settle, "the Service says who announces it", func() error {
		if err := k8s.Get(ctx, client.ObjectKeyFromObject(web), web); err != nil {
			return err
		}
		owner := d.announcer(vip)
		c := meta.FindStatusCondition(web.Status.Conditions, paasv1.ConditionAnnounced)
		if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, "announced by "+owner) {
			return fmt.Errorf("condition %+v", c)
		}
		return nil
	})
	st := &l2Announcement{d: d, web: web, vip: vip, k8s: k8s, top: top}
	st.moves(t)
	st.carriers(t)
}

// l2Announcement is TestL2Announcement's lab and what its steps share.
type l2Announcement struct {
	d   *l2Lab
	web *corev1.Service
	vip string
	k8s client.Client
	top *testing.T
}

// moves: VIPs spread, Local policy, and the VIP's owner cordoned, restarted, killed or cut off.
func (st *l2Announcement) moves(t *testing.T) {
	d, vip, top := st.d, st.vip, st.top
	t.Run("VIPs spread over the nodes", func(t *testing.T) {
		carriers := map[string]bool{}
		for i := range 8 {
			svc := d.lanService(t, fmt.Sprintf("spread-%d", i), false)
			carriers[d.owner(t, d.vipOf(t, svc), "")] = true
		}
		if len(carriers) < 2 {
			t.Fatalf("nine VIPs, all on %v", carriers)
		}
	})

	t.Run("Local policy: only a node with a local endpoint", func(t *testing.T) {
		svc := d.lanService(t, "local", true)
		if got := d.owner(t, d.vipOf(t, svc), ""); got != "node1" {
			t.Fatalf("Local Service announced by %s, its only endpoint is on node1", got)
		}
	})

	t.Run("a planned move (cordon) loses no request and no open connection", func(t *testing.T) {
		from := d.owner(t, vip, "")
		l := d.curlLoop("http://" + vip + "/")
		held := d.heldConnection(t, vipHostPort(vip))
		time.Sleep(time.Second)
		d.cordon(t, from, true)
		to := d.owner(t, vip, from)
		time.Sleep(3 * time.Second) // past the hand-over: the old owner is quiet now
		ok, failed, first := l.end()
		t.Logf("cordoned %s: %s took %s over; %d requests, %d failed", from, to, vip, ok+failed, failed)
		if failed > 0 || ok < 40 {
			t.Fatalf("%d of %d requests failed during the move (first: %v)", failed, ok+failed, first)
		}
		// The connection opened through the old owner lives on: the new owner
		// hands its segments back to the old one, which holds its NAT.
		d.cordon(t, from, false)
		d.waitAnnouncer(t, vip, from) // rendezvous hashing gives it back
		time.Sleep(3 * time.Second)   // past that hand-over too
		if ok, failed, first := held.end(); failed > 0 || ok < 100 {
			t.Fatalf("connection open across both moves: %d of %d requests failed (first: %v)\n%s's mangle table:\n%s", failed, ok+failed, first, to, d.in(to, "iptables-save", "-c", "-t", "mangle"))
		}
	})

	t.Run("a rogue node in announcedBy, publishing an address on the VIP's subnet, is handed no open connection", func(t *testing.T) {
		d.plannedMoveWithRogue(t, vip)
	})

	t.Run("SIGTERM restart of the owner's agent loses no request", func(t *testing.T) {
		from := d.owner(t, vip, "")
		l := d.curlLoop("http://" + vip + "/")
		time.Sleep(time.Second)
		d.stopAgent(from) // SIGINT: the same graceful path as SIGTERM
		during := d.announcer(vip)
		d.startAgent(top, from)
		if during != from {
			t.Fatalf("the restart moved %s from %s to %s", vip, from, during)
		}
		time.Sleep(3 * time.Second)
		if got := d.owner(t, vip, ""); got != from {
			t.Fatalf("the restart moved %s from %s to %s", vip, from, got)
		}
		ok, failed, first := l.end()
		t.Logf("restarted %s's agent: %d requests, %d failed", from, ok+failed, failed)
		if failed > 0 || ok < 40 {
			t.Fatalf("%d of %d requests failed during the restart (first: %v)", failed, ok+failed, first)
		}
	})

	t.Run("SIGKILL of the owner's agent moves the VIP", func(t *testing.T) {
		from := d.owner(t, vip, "")
		start := time.Now()
		_ = d.agents[from].Process.Kill()
		_ = d.agents[from].Wait()
		delete(d.agents, from)
		took := d.untilAnnouncedElsewhere(t, vip, from, start)
		to := d.owner(t, vip, from)
		t.Logf("killed %s's agent: %s taken over by %s after %s", from, vip, to, took)
		if _, err := d.curl("http://" + vip + "/"); err != nil {
			t.Fatal(err)
		}
		d.startAgent(top, from)
		d.waitAnnouncer(t, vip, from) // rendezvous hashing gives it back
	})

	t.Run("link down on the owner moves the VIP", func(t *testing.T) {
		from := d.owner(t, vip, "")
		start := time.Now()
		d.in(from, "ip", "link", "set", "eth0", "down")
		took := d.untilAnnouncedElsewhere(t, vip, from, start)
		to := d.owner(t, vip, from)
		t.Logf("%s's link down: %s taken over by %s after %s", from, vip, to, took)
		if _, err := d.curl("http://" + vip + "/"); err != nil {
			t.Fatal(err)
		}
		d.in(from, "ip", "link", "set", "eth0", "up")
	})
}

// carriers: nodeSelector, a group on no node's subnet, and forged ARP claims.
func (st *l2Announcement) carriers(t *testing.T) {
	d, web, vip, k8s := st.d, st.web, st.vip, st.k8s
	ctx := context.Background()
	t.Run("nodeSelector picks the carriers", func(t *testing.T) {
		d.label(t, "node3", map[string]string{"rack": "b"})
		if err := k8s.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "rack-b"},
			Spec: paasv1.IPGroupSpec{Segment: "192.0.2.240/28", AutoAssign: ptr.To(false), Announce: &paasv1.Announce{
				NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "b"}}}}}); err != nil {
			t.Fatal(err)
		}
		// The lan group must not hand out rack-b's addresses.
		var lan paasv1.IPGroup
		if err := k8s.Get(ctx, client.ObjectKey{Name: "lan"}, &lan); err != nil {
			t.Fatal(err)
		}
		patch := client.MergeFrom(lan.DeepCopy())
		lan.Spec.ExcludedIPs = append(lan.Spec.ExcludedIPs, "192.0.2.240/28")
		if err := k8s.Patch(ctx, &lan, patch); err != nil {
			t.Fatal(err)
		}
		svc := d.lanService(t, "rack-b", false, "vip.paas.org/ipgroup", "rack-b")
		v := d.vipOf(t, svc)
		if !strings.HasPrefix(v, "192.0.2.24") && !strings.HasPrefix(v, "192.0.2.25") {
			t.Fatalf("VIP %s is not from rack-b", v)
		}
		if got := d.owner(t, v, ""); got != "node3" {
			t.Fatalf("rack-b VIP announced by %s, only node3 is selected", got)
		}
	})

	t.Run("a group on no node's subnet says so", func(t *testing.T) {
		if err := k8s.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "elsewhere"},
			Spec: paasv1.IPGroupSpec{Segment: "203.0.113.0/24", AutoAssign: ptr.To(false)}}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "IPGroup elsewhere is not announceable", func() error {
			var g paasv1.IPGroup
			if err := k8s.Get(ctx, client.ObjectKey{Name: "elsewhere"}, &g); err != nil {
				return err
			}
			c := meta.FindStatusCondition(g.Status.Conditions, paasv1.IPGroupAnnounceable)
			if c == nil || c.Status != metav1.ConditionFalse || c.Reason != "NoInterfaceOnSegment" {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
		svc := d.lanService(t, "elsewhere", false, "vip.paas.org/ipgroup", "elsewhere")
		testenv.Eventually(t, settle, "the Service says nobody announces it", func() error {
			if err := k8s.Get(ctx, client.ObjectKeyFromObject(svc), svc); err != nil {
				return err
			}
			c := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionAnnounced)
			if c == nil || c.Reason != paasv1.ReasonNoAnnouncer {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
	})

	t.Run("a foreign ARP claim raises a condition", func(t *testing.T) {
		owner := d.owner(t, vip, "")
		d.in("client", "ip", "addr", "add", vip+"/32", "dev", "eth0")
		defer d.in("client", "ip", "addr", "del", vip+"/32", "dev", "eth0")
		d.in("client", "arping", "-U", "-c", "2", "-I", "eth0", vip)
		testenv.Eventually(t, settle, "Conflict on the ledger", func() error {
			var ip paasv1.IP
			if err := k8s.Get(ctx, client.ObjectKey{Name: vip}, &ip); err != nil {
				return err
			}
			c := meta.FindStatusCondition(ip.Status.Conditions, paasv1.IPConditionConflict)
			if c == nil || c.Status != metav1.ConditionTrue || !strings.Contains(c.Message, owner) {
				return fmt.Errorf("condition %+v", c)
			}
			return nil
		})
		eventuallyEvent(t, k8s, web, announce.EventARPConflict)
	})

	// The smoke size of make bench-arpflood: forged claims from random MACs
	// cost the owner bounded work and never its answers.
	t.Run("a flood of forged ARP claims: the VIP keeps answering", func(t *testing.T) {
		owner := d.owner(t, vip, "")
		r := d.floodClaims(t, vip, owner, 500, time.Second)
		t.Logf("%d claims sent; ARP answered %d/%d, curl %d/%d", r.sent, r.answered, r.asked, r.curlOK, r.curls)
		if r.sent < 400 || r.answered != r.asked || r.curlOK != r.curls {
			t.Errorf("under the flood: %+v, want every ARP request and curl answered", r)
		}
		if after := d.owner(t, vip, ""); after != owner {
			t.Errorf("the flood moved %s from %s to %s", vip, owner, after)
		}
	})
}

// untilAnnouncedElsewhere polls the ledger until a node other than from
// announces vip, and returns the time since start. (The failover figures with
// ARP-level precision come from make bench-failover.)
func (d *l2Lab) untilAnnouncedElsewhere(t testing.TB, vip, from string, start time.Time) time.Duration {
	t.Helper()
	for time.Since(start) < 20*time.Second {
		if n := d.announcer(vip); n != "" && n != from {
			return time.Since(start).Round(10 * time.Millisecond)
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("%s still announced by %s after 20 s", vip, from)
	return 0
}

// waitAnnouncer waits until the ledger says node announces vip.
func (d *l2Lab) waitAnnouncer(t testing.TB, vip, node string) {
	t.Helper()
	testenv.Eventually(t, settle, vip+" announced by "+node, func() error {
		if n := d.announcer(vip); n != node {
			return fmt.Errorf("announced by %q", n)
		}
		return nil
	})
}

func (d *dataLab) cordon(t testing.TB, node string, on bool) {
	var n corev1.Node
	if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Spec.Unschedulable = on
	if err := d.env.Admin.Patch(context.Background(), &n, patch); err != nil {
		t.Fatal(err)
	}
}

func (d *l2Lab) label(t testing.TB, node string, labels map[string]string) {
	var n corev1.Node
	if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	n.Labels = labels
	if err := d.env.Admin.Patch(context.Background(), &n, patch); err != nil {
		t.Fatal(err)
	}
}

func eventuallyEvent(t testing.TB, c client.Client, about client.Object, reason string) {
	t.Helper()
	testenv.Eventually(t, settle, "Event "+reason, func() error {
		var list corev1.EventList
		if err := c.List(context.Background(), &list, client.InNamespace(about.GetNamespace())); err != nil {
			return err
		}
		for _, e := range list.Items {
			if e.Reason == reason && e.InvolvedObject.Name == about.GetName() {
				return nil
			}
		}
		return fmt.Errorf("no %s Event for %s", reason, about.GetName())
	})
}
