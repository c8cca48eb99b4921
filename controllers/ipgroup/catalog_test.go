package ipgroup

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// testCatalog is a catalog synced from groups.
func testCatalog(t *testing.T, groups ...*paasv1.IPGroup) *groupCatalog {
	t.Helper()
	b := fake.NewClientBuilder().WithScheme(paasv1.NewScheme())
	for _, g := range groups {
		b = b.WithObjects(g)
	}
	c := newGroupCatalog()
	if err := c.query(context.Background(), b.Build(), func() {}); err != nil {
		t.Fatal(err)
	}
	return c
}

func catalogGroup(name, segment string, mutate ...func(*paasv1.IPGroup)) *paasv1.IPGroup {
	g := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: name, Generation: 1}, Spec: paasv1.IPGroupSpec{Segment: segment}}
	for _, m := range mutate {
		m(g)
	}
	return g
}

func TestCatalogOverlaps(t *testing.T) {
	c := testCatalog(t,
		catalogGroup("a", "192.0.2.0/24"),
		catalogGroup("big", "192.0.0.0/16"),
		catalogGroup("b", "198.51.100.0/25"),
		catalogGroup("c", "198.51.100.128/25"),
		catalogGroup("v6", "2001:db8::/64"),
	)
	addr := netip.MustParseAddr
	for _, tc := range []struct {
		desc        string
		first, last string
		want        string
	}{
		{desc: "an address in a and the /16 around it", first: "192.0.2.7", last: "192.0.2.7", want: "[a big]"},
		{desc: "an address only the /16 holds", first: "192.0.200.1", last: "192.0.200.1", want: "[big]"},
		{desc: "a range over two neighbours", first: "198.51.100.100", last: "198.51.100.200", want: "[b c]"},
		{desc: "an address in no group", first: "203.0.113.1", last: "203.0.113.1", want: "[]"},
		{desc: "IPv6", first: "2001:db8::5", last: "2001:db8::5", want: "[v6]"},
	} {
		got := c.overlapping(addr(tc.first), addr(tc.last), "")
		slices.Sort(got)
		if s := fmt.Sprint(got); s != tc.want {
			t.Errorf("%s: %s, want %s", tc.desc, s, tc.want)
		}
	}
	parsedA, _ := c.parsed(catalogGroup("a", "192.0.2.0/24"))
	if got := fmt.Sprint(c.groupsOverlapping(parsedA, "a")); got != "[big]" {
		t.Errorf("a overlaps %s, want [big]", got)
	}
}

func TestCatalogGroupsForNode(t *testing.T) {
	zoneA := func(g *paasv1.IPGroup) {
		g.Spec.Announce = &paasv1.Announce{NodeSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"zone": "a"}}}
	}
	bgp := func(g *paasv1.IPGroup) { g.Spec.Announce = &paasv1.Announce{Mode: paasv1.AnnounceBGP} }
	c := testCatalog(t,
		catalogGroup("lan1", "192.0.2.0/25"),
		catalogGroup("lan2", "192.0.2.128/25"),
		catalogGroup("far", "203.0.113.0/24"),
		catalogGroup("zone-a", "198.51.100.0/24", zoneA),
		catalogGroup("routed", "10.9.0.0/24", bgp),
	)
	node := func(mutate ...func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"zone": "b"},
			Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","addrs":["192.0.2.11/25"]}]`}}}
		for _, m := range mutate {
			m(n)
		}
		return n
	}
	on := func(addrs string) func(*corev1.Node) {
		return func(n *corev1.Node) {
			n.Annotations[paasv1.NodeInterfacesAnnotation] = `[{"name":"eth0","addrs":["192.0.2.11/25"]},{"name":"eth1","addrs":[` + addrs + `]}]`
		}
	}
	for _, tc := range []struct {
		desc     string
		old, cur *corev1.Node
		want     string
	}{
		{desc: "an interface on lan2 appears: lan2 only", old: node(), cur: node(on(`"192.0.2.200/25"`)), want: "[lan2]"},
		{desc: "an interface on an unselected zone's segment, the Node's address on it: not to announce, but its address and the subnet's ends are reserved there",
			old: node(), cur: node(on(`"198.51.100.9/24"`), func(n *corev1.Node) {
				n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.9"}}
			}), want: "[zone-a]"},
		{desc: "an interface on an unselected zone's segment, no Node address on it: its claims count for nothing there",
			old: node(), cur: node(on(`"198.51.100.9/24"`)), want: "[]"},
		{desc: "an interface on no group's segment: nothing", old: node(), cur: node(on(`"172.16.0.9/24"`)), want: "[]"},
		{desc: "cordoned: the L2 groups it is on and the BGP groups that select it",
			old: node(), cur: node(func(n *corev1.Node) { n.Spec.Unschedulable = true }), want: "[lan1 routed]"},
		{desc: "relabelled into zone a: every group selecting it, before or after",
			old: node(), cur: node(func(n *corev1.Node) { n.Labels = map[string]string{"zone": "a"} }), want: "[far lan1 lan2 routed zone-a]"},
		{desc: "a new address reserved in far", old: node(),
			cur: node(func(n *corev1.Node) {
				n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "203.0.113.5"}}
			}), want: "[far]"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			if got := fmt.Sprint(c.groupsForNode(tc.old, tc.cur, election.OnCordonHandover)); got != tc.want {
				t.Errorf("groups = %s, want %s", got, tc.want)
			}
		})
	}
}

func TestCatalogFollowsEvents(t *testing.T) {
	c := testCatalog(t, catalogGroup("a", "192.0.2.0/24"))
	b := catalogGroup("b", "192.0.2.128/25", func(g *paasv1.IPGroup) { g.UID = "b-1" })
	c.observe(b)
	overlapsOfA := func() string {
		var got []string
		_ = c.query(context.Background(), nil, func() {
			parsed, _ := c.parsed(catalogGroup("a", "192.0.2.0/24"))
			got = c.groupsOverlapping(parsed, "a")
		})
		return fmt.Sprint(got)
	}
	if got := overlapsOfA(); got != "[b]" {
		t.Fatalf("a overlaps %s after b was created, want [b]", got)
	}
	older := b.DeepCopy()
	moved := b.DeepCopy()
	moved.Generation, moved.Spec.Segment = 2, "198.51.100.0/24"
	c.observe(moved)
	c.observe(older) // a reconcile that read the group before the edit
	if got := overlapsOfA(); got != "[]" {
		t.Fatalf("a overlaps %s after b moved away, want []", got)
	}
	c.forget("b", "b-1")
	c.observe(moved) // a reconcile that read the group before its deletion
	if _, ok := c.entries["b"]; ok {
		t.Fatal("a deleted group came back")
	}
}
