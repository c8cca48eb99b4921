//go:build root && envtest

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"net/netip"
	"regexp"
	"slices"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// rogueAddr is the address the rogue node adds to its LAN interface, and so
// publishes: inside the LAN's excluded range, never a VIP.
const rogueAddr = "192.0.2.30"

// plannedMoveWithRogue moves vip off its owner and back (cordon, uncordon)
// while the third node, a rogue, keeps itself first in the ledger's
// announcedBy (with its own agent's identity: the admission policy lets an
// agent add its own node) and publishes one more address on the VIP's
// subnet. The new owner must hand the open connections back to the node the
// election made owner, at its InternalIP: a held connection lives on, and no
// segment reaches the rogue (a counter in its prerouting hook says so).
func (d *l2Lab) plannedMoveWithRogue(t *testing.T, vip string) {
	ctx := context.Background()
	from := d.owner(t, vip, "")
	var others []election.Node
	for _, n := range []string{"node1", "node2", "node3"} {
		if n != from {
			others = append(others, election.Node{Name: n, Interfaces: []election.Interface{
				{Name: "eth0", Prefix: netip.MustParsePrefix(lanIP[n] + "/24")}}})
		}
	}
	// The node the election gives the VIP to while from is cordoned; the rogue is the other one.
	to, _, _ := election.Owner(netip.MustParseAddr(vip), election.Candidacy{}, others)
	rogue := others[0].Name
	if rogue == to {
		rogue = others[1].Name
	}
	t.Logf("%s owns %s, %s takes it over when it is cordoned, %s is the rogue", from, vip, to, rogue)

	rc, err := client.New(d.env.AgentConfig(rogue), client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	d.in(rogue, "ip", "addr", "add", rogueAddr+"/24", "dev", "eth0")
	t.Cleanup(func() { d.in(rogue, "ip", "addr", "del", rogueAddr+"/24", "dev", "eth0") })
	// Published at once, as its agent does at its next round.
	var ifaces []paasv1.NodeInterface
	if err := d.inNetns(rogue, func() (err error) { ifaces, err = nodes.LocalInterfaces(); return err }); err != nil {
		t.Fatal(err)
	}
	value, err := json.Marshal(ifaces)
	if err != nil {
		t.Fatal(err)
	}
	var node corev1.Node
	if err := rc.Get(ctx, client.ObjectKey{Name: rogue}, &node); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(node.DeepCopy())
	node.Annotations[paasv1.NodeInterfacesAnnotation] = string(value)
	if err := rc.Patch(ctx, &node, patch); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, settle, rogue+" publishes "+rogueAddr, func() error {
		var v paasv1.NodeView
		if err := d.env.Admin.Get(ctx, client.ObjectKey{Name: rogue}, &v); err != nil {
			return err
		}
		for _, ifc := range v.Spec.Interfaces {
			if slices.Contains(ifc.Addrs, rogueAddr+"/24") {
				return nil
			}
		}
		return fmt.Errorf("view interfaces %+v", v.Spec.Interfaces)
	})
	d.in(rogue, "nft", "add table inet e2e_rogue")
	t.Cleanup(func() { d.in(rogue, "nft", "delete table inet e2e_rogue") })
	d.in(rogue, "nft", "add chain inet e2e_rogue pre { type filter hook prerouting priority -310 ; }")
	d.in(rogue, "nft", "add rule inet e2e_rogue pre ip daddr "+vip+" tcp dport 80 counter")

	stop, wrote := rogueAnnouncer(t, rc, rogue, vip)
	l := d.curlLoop("http://" + vip + "/")
	held := d.heldConnection(t, vipHostPort(vip))
	time.Sleep(time.Second)
	d.cordon(t, from, true)
	d.clientMovedTo(t, vip, to)
	time.Sleep(3 * time.Second) // past the hand-over: the old owner is quiet now
	d.cordon(t, from, false)
	d.clientMovedTo(t, vip, from) // rendezvous hashing gives it back
	time.Sleep(3 * time.Second)
	stop()
	ok, failed, first := l.end()
	hok, hfailed, hfirst := held.end()
	teed := d.rogueCounter(t, rogue)
	t.Logf("the rogue wrote announcedBy %d times and received %d segments to %s; %d requests, %d failed; held: %d, %d failed",
		wrote.Load(), teed, vip, ok+failed, failed, hok+hfailed, hfailed)
	if wrote.Load() == 0 {
		t.Fatalf("the rogue never put itself into announcedBy of %s", vip)
	}
	if teed > 0 {
		t.Errorf("%d segments to %s reached the rogue %s\n%s's mangle table:\n%s", teed, vip, rogue, to, d.in(to, "iptables-save", "-c", "-t", "mangle"))
	}
	if failed > 0 {
		t.Errorf("%d of %d requests failed during the moves (first: %v)", failed, ok+failed, first)
	}
	if hfailed > 0 || hok < 100 {
		t.Errorf("connection open across both moves: %d of %d requests failed (first: %v)", hfailed, hok+hfailed, hfirst)
	}
}

// rogueAnnouncer keeps node first in announcedBy of vip's ledger entry,
// writing with c (node's agent's identity), until stop; wrote counts its writes.
func rogueAnnouncer(t *testing.T, c client.Client, node, vip string) (stop func(), wrote *atomic.Int64) {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	wrote = &atomic.Int64{}
	key := client.ObjectKey{Name: paasv1.IPObjectName(netip.MustParseAddr(vip))}
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			time.Sleep(50 * time.Millisecond)
			var ip paasv1.IP
			if err := c.Get(ctx, key, &ip); err != nil {
				continue
			}
			by := ip.Status.AnnouncedBy
			if len(by) > 0 && by[0] == node {
				continue
			}
			// Optimistic locking: a list read before the owner's latest claim
			// would name a node the admission policy does not let it add.
			patch := client.MergeFromWithOptions(ip.DeepCopy(), client.MergeFromWithOptimisticLock{})
			ip.Status.AnnouncedBy = append([]string{node}, slices.DeleteFunc(slices.Clone(by), func(n string) bool { return n == node })...)
			if err := c.Status().Patch(ctx, &ip, patch); err == nil {
				wrote.Add(1)
			}
		}
	}()
	stop = func() { cancel(); <-done }
	t.Cleanup(stop)
	return stop, wrote
}

var nftPackets = regexp.MustCompile(`counter packets (\d+)`)

// rogueCounter is how many segments to the VIP reached node (see plannedMoveWithRogue).
func (d *l2Lab) rogueCounter(t *testing.T, node string) int {
	m := nftPackets.FindStringSubmatch(d.in(node, "nft", "list table inet e2e_rogue"))
	if m == nil {
		t.Fatalf("no counter in %s's table e2e_rogue", node)
	}
	n, _ := strconv.Atoi(m[1])
	return n
}

// clientMovedTo waits until the client's neighbour entry for vip names
// node's MAC: node's gratuitous ARP moved it. It only looks: an ARP request
// of its own would be answered by the old owner too while it hands over,
// and could move the client back to it.
func (d *l2Lab) clientMovedTo(t *testing.T, vip, node string) {
	t.Helper()
	testenv.Eventually(t, settle, "the client reaches "+vip+" at "+node, func() error {
		if mac := d.clientNeighbour(vip); mac != d.macs[node] {
			return fmt.Errorf("the client's neighbour entry for %s is %q, want %s's %s", vip, mac, node, d.macs[node])
		}
		return nil
	})
}
