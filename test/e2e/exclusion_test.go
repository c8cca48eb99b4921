//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// A node labelled node.kubernetes.io/exclude-from-external-load-balancers
// never carries a VIP, and leaving it is a planned move; with --on-cordon=keep
// cordon alone moves nothing (the default, handover, is TestL2Announcement's
// "a planned move (cordon)").
func TestNodeExclusion(t *testing.T) {
	d, _, vip, owner := announcedLab(t, "--on-cordon=keep")

	t.Run("with --on-cordon=keep cordoning the owner moves nothing", func(t *testing.T) {
		l := d.curlLoop("http://" + vip + "/")
		d.cordon(t, owner, true)
		defer d.cordon(t, owner, false)
		d.viewShows(t, owner, "cordoned", func(v *paasv1.NodeView) bool { return v.Spec.Unschedulable })
		// The agents react to a Node change within a pass; give them several.
		deadline := time.Now().Add(4 * time.Second)
		for time.Now().Before(deadline) {
			if now := d.announcer(vip); now != owner {
				t.Fatalf("cordoned %s under --on-cordon=keep: %s now announced by %q", owner, vip, now)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if got := d.owner(t, vip, ""); got != owner {
			t.Fatalf("ARP for %s answered by %s, want the cordoned %s", vip, got, owner)
		}
		l.atLeast(t, 40)
		if ok, failed, first := l.end(); failed > 0 || ok < 40 {
			t.Fatalf("%d of %d requests failed (first: %v)", failed, ok+failed, first)
		}
	})

	t.Run("labelling the owner excluded moves its VIP without losing a request or an open connection", func(t *testing.T) {
		from := d.owner(t, vip, "")
		l := d.curlLoop("http://" + vip + "/")
		held := d.heldConnection(t, vipHostPort(vip))
		time.Sleep(time.Second)
		d.setNodeLabel(t, from, corev1.LabelNodeExcludeBalancers, "true")
		d.viewShows(t, from, "excluded", func(v *paasv1.NodeView) bool { _, ok := v.Spec.Labels[corev1.LabelNodeExcludeBalancers]; return ok })
		to := d.owner(t, vip, from)
		time.Sleep(3 * time.Second) // past the hand-over: the old owner is quiet now
		l.atLeast(t, 40)
		ok, failed, first := l.end()
		t.Logf("excluded %s: %s took %s over; %d requests, %d failed", from, to, vip, ok+failed, failed)
		if failed > 0 || ok < 40 {
			t.Fatalf("%d of %d requests failed during the move (first: %v)", failed, ok+failed, first)
		}

		// The VIP comes back when the label goes (rendezvous hashing), again
		// without a loss; the connection opened through the first owner lives
		// through both moves.
		d.setNodeLabel(t, from, corev1.LabelNodeExcludeBalancers, "")
		d.waitAnnouncer(t, vip, from)
		time.Sleep(3 * time.Second)
		held.atLeast(t, 100)
		if ok, failed, first := held.end(); failed > 0 || ok < 100 {
			t.Fatalf("connection open across both moves: %d of %d requests failed (first: %v)", failed, ok+failed, first)
		}
	})

	t.Run("an excluded node gets no new VIP", func(t *testing.T) {
		d.setNodeLabel(t, owner, corev1.LabelNodeExcludeBalancers, "true")
		defer d.setNodeLabel(t, owner, corev1.LabelNodeExcludeBalancers, "")
		d.owner(t, vip, owner)
		for i := range 6 {
			svc := d.lanService(t, fmt.Sprintf("after-exclusion-%d", i), false)
			if got := d.owner(t, d.vipOf(t, svc), ""); got == owner {
				t.Fatalf("a new VIP went to the excluded %s", owner)
			}
		}
	})
}

// viewShows waits, up to 10 s, until the NodeView of node (the operator's copy
// of its Node, 5 s after a change) shows what the test just changed on its Node: the other agents see the change through it
// (and not through a direct read of the Node, the path of nodes without a
// view).
func (d *dataLab) viewShows(t testing.TB, node, what string, ok func(*paasv1.NodeView) bool) {
	t.Helper()
	var v paasv1.NodeView
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(100 * time.Millisecond) {
		if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: node}, &v); err == nil && ok(&v) {
			return
		}
	}
	t.Fatalf("the NodeView of %s does not show it %s: %+v", node, what, v.Spec)
}

// publishView does what a new node's agent and the operator do first: the
// agent annotates its Node with its interfaces (none here) and the operator
// creates the node's NodeView from the Node (agents create none).
func (d *dataLab) publishView(t testing.TB, node string) {
	t.Helper()
	ctx := context.Background()
	var n corev1.Node
	if err := d.env.Admin.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	n.Annotations[paasv1.NodeInterfacesAnnotation] = "[]"
	if err := d.env.Admin.Patch(ctx, &n, patch); err != nil {
		t.Fatal(err)
	}
	d.viewShows(t, node, "exists", func(*paasv1.NodeView) bool { return true })
}

// atLeast waits, up to 30 s, until the loop has made n successful requests:
// on a loaded machine curl runs slower than 20 Hz, and fewer would prove little.
func (l *loop) atLeast(t testing.TB, n int64) {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); l.ok.Load() < n && l.failed.Load() == 0 && time.Now().Before(deadline); {
		time.Sleep(100 * time.Millisecond)
	}
}

// setNodeLabel sets one label of node to value, or removes it when value is
// "" (the exclusion label is set with "true", as kubectl label ... =true).
func (d *dataLab) setNodeLabel(t testing.TB, node, key, value string) {
	t.Helper()
	var n corev1.Node
	if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Labels == nil {
		n.Labels = map[string]string{}
	}
	if value == "" {
		delete(n.Labels, key)
	} else {
		n.Labels[key] = value
	}
	if err := d.env.Admin.Patch(context.Background(), &n, patch); err != nil {
		t.Fatal(err)
	}
}
