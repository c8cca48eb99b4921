package announce

import (
	"context"
	"maps"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// TestHandoffTrust is node a taking a VIP over while a rogue node tries to
// become the target of its open connections: it adds itself to the ledger's
// announcedBy (first, or alone: the admission policy lets it) and publishes
// an address on the VIP's subnet. Each case is one pass of decide from the
// memory the last pass left, and the hand-offs the announcer programs from it
// with the Nodes' kubelet-written InternalIPs.
func TestHandoffTrust(t *testing.T) {
	node := func(name, prefix string) election.Node {
		return election.Node{Name: name, Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix(prefix)}}}
	}
	a, b := node("a", "192.0.2.11/24"), node("b", "192.0.2.12/24")
	bCordoned := b
	bCordoned.Cordoned = true
	// The rogue is alive but never elected (excluded from carrying VIPs),
	// and says it has an address on the VIP's subnet.
	rogue := node("rogue", "192.0.2.99/24")
	rogue.Excluded = true
	internalIPs := map[string][]netip.Addr{ // as the kubelets wrote them
		"a":     {netip.MustParseAddr("192.0.2.11")},
		"b":     {netip.MustParseAddr("192.0.2.12"), netip.MustParseAddr("2001:db8::12")},
		"rogue": {netip.MustParseAddr("192.0.2.13")},
	}
	// A VIP that a wins over b, found rather than assumed.
	var vip netip.Addr
	for i := 1; i < 255 && !vip.IsValid(); i++ {
		v := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		if owner, _, _ := election.Owner(v, election.Candidacy{}, []election.Node{a, b}); owner == "a" {
			vip = v
		}
	}
	l2 := vipCandidacy{group: &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "l2"}}}
	pass := func(announcedBy []string, alive ...election.Node) observation {
		return observation{vips: map[netip.Addr]vipCandidacy{vip: l2}, alive: alive, known: len(alive),
			ledger: map[netip.Addr]*paasv1.IP{vip: {ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(vip)},
				Status: paasv1.IPStatus{AnnouncedBy: announcedBy}}}}
	}
	bOwned := carryover{owned: map[netip.Addr]string{}, elected: map[netip.Addr]string{vip: "b"}}
	restarted := carryover{}
	to := func(addr string) dataplane.Handoffs { return dataplane.Handoffs{vip: netip.MustParseAddr(addr)} }

	for _, tc := range []struct {
		desc string
		mem  carryover
		obs  observation
		want dataplane.Handoffs
	}{
		{"b cordoned: its connections go to its InternalIP",
			bOwned, pass([]string{"b"}, a, bCordoned, rogue), to("192.0.2.12")},
		{"the rogue put itself first in announcedBy: still b, the election's last owner",
			bOwned, pass([]string{"rogue", "b"}, a, bCordoned, rogue), to("192.0.2.12")},
		{"the rogue replaced b in announcedBy: still b",
			bOwned, pass([]string{"rogue"}, a, bCordoned, rogue), to("192.0.2.12")},
		{"the rogue in announcedBy of a VIP a owned already: no hand-off at all",
			carryover{owned: map[netip.Addr]string{vip: "eth0"}, elected: map[netip.Addr]string{vip: "a"}},
			pass([]string{"rogue", "a"}, a, b, rogue), dataplane.Handoffs{}},
		{"a took the VIP from nobody (no node eligible last pass): none, whoever announcedBy names",
			carryover{owned: map[netip.Addr]string{}, elected: map[netip.Addr]string{vip: ""}},
			pass([]string{"rogue"}, a, b, rogue), dataplane.Handoffs{}},
		{"b is dead: none (its connections died with it)",
			bOwned, pass([]string{"b"}, a, rogue), dataplane.Handoffs{}},
		{"a just started and the ledger names b, whom the election picks without a: b",
			restarted, pass([]string{"b"}, a, b, rogue), to("192.0.2.12")},
		{"a just started and the ledger names the rogue, whom the election never picks: none",
			restarted, pass([]string{"rogue"}, a, b, rogue), dataplane.Handoffs{}},
		{"a just started and the rogue put itself first: b, the one the election picks",
			restarted, pass([]string{"rogue", "b"}, a, b, rogue), to("192.0.2.12")},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			d, _ := decide(announcerPolicy{self: "a"}, tc.obs, tc.mem)
			if _, owns := d.own[vip]; !owns {
				t.Fatalf("a does not own %s: %v", vip, d.own)
			}
			onLink := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}
			if got := handoffTargets(d.handOff, internalIPs, onLink); !maps.Equal(got, tc.want) {
				t.Errorf("hand-offs %v, want %v (from %v)", got, tc.want, d.handOff)
			}
		})
	}
}

func TestHandoffTargets(t *testing.T) {
	a := netip.MustParseAddr
	vip4, vip6 := a("192.0.2.100"), a("2001:db8::100")
	internalIPs := map[string][]netip.Addr{
		"node1":    {a("203.0.113.11"), a("192.0.2.11"), a("2001:db8:1::11"), a("2001:db8::11")},
		"offlink":  {a("203.0.113.12"), a("198.51.100.12")},
		"v4only":   {a("192.0.2.12")},
		"itsvip":   {a("192.0.2.100")},
		"unlisted": nil,
	}
	for _, tc := range []struct {
		name string
		from map[netip.Addr]string
		want dataplane.Handoffs
	}{
		{"the InternalIP of the VIP's family on a subnet of this node's",
			map[netip.Addr]string{vip4: "node1", vip6: "node1"},
			dataplane.Handoffs{vip4: a("192.0.2.11"), vip6: a("2001:db8::11")}},
		{"none on a subnet of this node's: the first of the family",
			map[netip.Addr]string{vip4: "offlink"},
			dataplane.Handoffs{vip4: a("203.0.113.12")}},
		{"no InternalIP of the family: none",
			map[netip.Addr]string{vip6: "v4only"},
			dataplane.Handoffs{}},
		{"a Node that could not be read, or lists no address: none",
			map[netip.Addr]string{vip4: "unread", vip6: "unlisted"},
			dataplane.Handoffs{}},
		{"never the VIP itself",
			map[netip.Addr]string{vip4: "itsvip"},
			dataplane.Handoffs{}},
		{"taken over from nobody: none",
			map[netip.Addr]string{},
			dataplane.Handoffs{}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			onLink := []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8::/64")}
			if got := handoffTargets(tc.from, internalIPs, onLink); !maps.Equal(got, tc.want) {
				t.Errorf("got %v, want %v", got, tc.want)
			}
		})
	}
}

// TestHandoffInternalIPsFromTheNode: the addresses open connections are
// handed to are read from the Node the kubelet writes, kept a while, and
// only for the nodes still handed to.
func TestHandoffInternalIPsFromTheNode(t *testing.T) {
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
		{Type: corev1.NodeHostName, Address: "b"}, {Type: corev1.NodeInternalIP, Address: "192.0.2.12"}}}}
	c := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).WithObjects(n).Build()
	a := &Announcer{Nodes: c}
	vip := netip.MustParseAddr("192.0.2.100")
	want := map[string][]netip.Addr{"b": {netip.MustParseAddr("192.0.2.12")}}
	if got := a.internalIPs(ctx, map[netip.Addr]string{vip: "b"}); !maps.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("got %v, want %v", got, want)
	}
	if err := c.Delete(ctx, n); err != nil {
		t.Fatal(err)
	}
	if got := a.internalIPs(ctx, map[netip.Addr]string{vip: "b"}); !maps.EqualFunc(got, want, slices.Equal) {
		t.Errorf("read again at once: got %v, want the kept %v", got, want)
	}
	if got := a.internalIPs(ctx, map[netip.Addr]string{vip: "unknown"}); len(got) != 0 || len(a.kubeletAddrs) != 0 {
		t.Errorf("a Node that cannot be read: got %v, kept %v", got, a.kubeletAddrs)
	}
}
