package nodes

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
	"sigs.k8s.io/controller-runtime/pkg/client/interceptor"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/nodeview"
)

func agentNode(name, ip string) *corev1.Node {
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID("uid-" + name),
		Labels:      map[string]string{"kubernetes.io/hostname": name},
		Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","addrs":["` + ip + `/24"]}]`}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}}}}
}

// TestListNodesDuringAnUpgrade walks a rolling upgrade as a new agent (on
// node-a) sees it: node-b's agent is new (a view), node-c's old (no view,
// alive in the gossip), node-d's old and not yet in the gossip; the agent's
// cache holds its own Node only. Every step says which nodes the agent reads,
// how (cordoned or not), and how many Nodes it had to GET.
func TestListNodesDuringAnUpgrade(t *testing.T) {
	ctx := context.Background()
	a, b, c, d := agentNode("node-a", "192.0.2.1"), agentNode("node-b", "192.0.2.2"), agentNode("node-c", "192.0.2.3"), agentNode("node-d", "192.0.2.4")
	viewB, _ := nodeview.Of(b)
	// The cache: this node's Node and the views.
	cache := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).WithObjects(a, viewB).Build()
	// The API server: every Node.
	gets := 0
	api := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).WithObjects(a.DeepCopy(), b.DeepCopy(), c.DeepCopy(), d.DeepCopy()).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets++
			return cl.Get(ctx, key, obj, opts...)
		}}).Build()
	now := time.Unix(1000, 0)
	members := []string{"node-a", "node-b", "node-c"}
	u := &Unviewed{Direct: api, Members: func() []string { return members }, now: func() time.Time { return now }}

	type want struct {
		nodes    []string // name, + when cordoned
		gets     int
		internal map[string]string // node → its InternalIP as read
	}
	steps := []struct {
		desc string
		do   func()
		want want
	}{
		{"first read: node-b from its view, node-c (alive, no view) from the API server, node-d unknown",
			func() {}, want{nodes: []string{"node-a", "node-b", "node-c"}, gets: 1}},
		{"again within the TTL: nothing read from the API server",
			func() { now = now.Add(unviewedMinTTL / 2) }, want{nodes: []string{"node-a", "node-b", "node-c"}, gets: 0}},
		{"node-c cordoned: seen once the TTL has passed, not before",
			func() { cordon(t, api, "node-c") }, want{nodes: []string{"node-a", "node-b", "node-c"}, gets: 0}},
		{"... after the TTL",
			func() { now = now.Add(unviewedMinTTL) }, want{nodes: []string{"node-a", "node-b", "node-c+"}, gets: 1}},
		{"the gossip names node-d, which the index does not know: asked, read",
			func() { u.Ask("node-d") }, want{nodes: []string{"node-a", "node-b", "node-c+", "node-d"}, gets: 1}},
		{"a forged name: read once, not there, not listed",
			func() { u.Ask("node-x") }, want{nodes: []string{"node-a", "node-b", "node-c+", "node-d"}, gets: 1}},
		{"node-c's agent dies: still counted (read before), refreshed after the TTL",
			func() { members = []string{"node-a", "node-b"}; now = now.Add(unviewedMinTTL) },
			want{nodes: []string{"node-a", "node-b", "node-c+", "node-d"}, gets: 2}},
		{"node-c upgraded: its view replaces the Node, which is not read any more",
			func() {
				nc := agentNode("node-c", "192.0.2.33")
				nc.Spec.Unschedulable = true
				v, _ := nodeview.Of(nc)
				if err := cache.Create(ctx, v); err != nil {
					t.Fatal(err)
				}
				now = now.Add(unviewedMinTTL)
			},
			want{nodes: []string{"node-a", "node-b", "node-c+", "node-d"}, gets: 1, internal: map[string]string{"node-c": "192.0.2.33"}}},
		{"node-d deleted: gone after the TTL",
			func() {
				if err := api.Delete(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-d"}}); err != nil {
					t.Fatal(err)
				}
				now = now.Add(unviewedMinTTL)
			},
			want{nodes: []string{"node-a", "node-b", "node-c+"}, gets: 1}},
	}
	for _, s := range steps {
		s.do()
		gets = 0
		nodes, _, err := List(ctx, cache, u)
		if err != nil {
			t.Fatalf("%s: %v", s.desc, err)
		}
		var got []string
		for i := range nodes {
			n := election.NodeOf(&nodes[i])
			name := n.Name
			if n.Cordoned {
				name += "+"
			}
			if !n.Agent || len(n.Interfaces) != 1 {
				t.Errorf("%s: %s read as %+v, want an agent with its interface", s.desc, n.Name, n)
			}
			if ip, ok := s.want.internal[n.Name]; ok && election.InternalIPs(&nodes[i])[0].String() != ip {
				t.Errorf("%s: %s has InternalIPs %v, want %s", s.desc, n.Name, election.InternalIPs(&nodes[i]), ip)
			}
			got = append(got, name)
		}
		slices.Sort(got)
		if !slices.Equal(got, s.want.nodes) || gets != s.want.gets {
			t.Errorf("%s: read %v with %d GETs, want %v with %d", s.desc, got, gets, s.want.nodes, s.want.gets)
		}
	}
}

// unviewedGETsPerSecond is what one agent's reads of n Nodes without a view
// cost the API server on average: n GETs every unviewedTTL(n).
func unviewedGETsPerSecond(n int) float64 {
	return float64(n) / unviewedTTL(n).Seconds()
}

// TestUnviewedTTL: the Nodes read without a view cost an agent at most 5
// GETs a second, and are read at least every 10 s; with none, nothing asks
// the announcer for extra passes.
func TestUnviewedTTL(t *testing.T) {
	for _, c := range []struct {
		n    int
		want time.Duration
	}{{1, 10 * time.Second}, {50, 10 * time.Second}, {51, 10200 * time.Millisecond}, {1000, 200 * time.Second}} {
		if got := unviewedTTL(c.n); got != c.want {
			t.Errorf("unviewedTTL(%d) = %s, want %s", c.n, got, c.want)
		}
	}
	for n, want := range map[int]float64{1: 0.1, 50: 5, 1000: 5} {
		if got := unviewedGETsPerSecond(n); got != want {
			t.Errorf("unviewedGETsPerSecond(%d) = %g, want %g", n, got, want)
		}
	}
	var none *Unviewed
	if got := none.RefreshEvery(); got != 0 {
		t.Errorf("no Unviewed: RefreshEvery %s, want 0", got)
	}
	a := agentNode("node-a", "192.0.2.1")
	cache := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).WithObjects(a).Build()
	u := &Unviewed{Direct: cache, Members: func() []string { return []string{"node-a"} }}
	if _, _, err := List(context.Background(), cache, u); err != nil || u.RefreshEvery() != 0 {
		t.Errorf("every member has its Node or view: RefreshEvery %s (err %v), want 0", u.RefreshEvery(), err)
	}
}

func cordon(t *testing.T, c client.Client, name string) {
	t.Helper()
	var n corev1.Node
	if err := c.Get(context.Background(), client.ObjectKey{Name: name}, &n); err != nil {
		t.Fatal(err)
	}
	n.Spec.Unschedulable = true
	if err := c.Update(context.Background(), &n); err != nil {
		t.Fatal(err)
	}
}

// The gossip asks about an unknown member (ask) while memberlist holds its
// node lock, which Members needs as well: reading the Nodes must not hold
// its own lock while it reads the members, or the two wait for each other
// (an agent's gossip and announcer stopped for good in the e2e suite).
func TestUnviewedReadsMembersOutsideItsLock(t *testing.T) {
	var memberlistLock sync.Mutex // stands for memberlist's node lock
	u := &Unviewed{}
	u.Members = func() []string {
		memberlistLock.Lock()
		defer memberlistLock.Unlock()
		return []string{"node-a"}
	}
	asked := make(chan struct{})
	memberlistLock.Lock() // memberlist admits a member: it holds its lock and asks
	go func() {
		defer close(asked)
		defer memberlistLock.Unlock()
		time.Sleep(50 * time.Millisecond) // nodes() below is under way
		u.Ask("node-x")
	}()
	done := make(chan struct{})
	go func() { defer close(done); u.nodes(context.Background(), map[string]bool{}) }()
	for _, ch := range []chan struct{}{asked, done} {
		select {
		case <-ch:
		case <-time.After(5 * time.Second):
			t.Fatal("reading the Nodes and the gossip's ask wait for each other")
		}
	}
}

// TestInventedNamesCostABoundedNumberOfGETs: a gossip member naming invented
// nodes on every round makes the agent read at most a fleet's worth at once
// and then unviewedGetsPerSecond; names over the budget wait, still asked.
func TestInventedNamesCostABoundedNumberOfGETs(t *testing.T) {
	var gets atomic.Int64 // the GETs run 8 at once
	api := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			gets.Add(1)
			return cl.Get(ctx, key, obj, opts...)
		}}).Build()
	now := time.Unix(1000, 0)
	u := &Unviewed{Direct: api, now: func() time.Time { return now }}
	invent := func(round, n int) {
		for i := range n {
			u.Ask(fmt.Sprintf("invented-%d-%d", round, i))
		}
	}
	invent(0, 2*maxAsked) // ask keeps maxAsked of them
	u.nodes(context.Background(), map[string]bool{})
	if n := gets.Load(); n != maxAsked {
		t.Fatalf("first flood: %d GETs, want the burst, %d", n, maxAsked)
	}
	for round := 1; round <= 5; round++ { // five rounds of joins in the same second
		invent(round, 100)
		u.nodes(context.Background(), map[string]bool{})
	}
	if extra := gets.Load() - maxAsked; extra != 0 {
		t.Fatalf("flooded again within the second: %d more GETs, want 0", extra)
	}
	now = now.Add(time.Second)
	u.nodes(context.Background(), map[string]bool{})
	if extra := gets.Load() - maxAsked; extra != unviewedGetsPerSecond {
		t.Fatalf("a second later: %d more GETs, want %d", extra, unviewedGetsPerSecond)
	}
}

// TestUnviewedReadsFromTheWatchCache: every Node read without a view asks
// for resourceVersion "0", which the API server serves from its watch cache;
// a quorum read would go to etcd, some 10,000 times a second at the worst
// point of a rolling upgrade of 2,000 nodes.
func TestUnviewedReadsFromTheWatchCache(t *testing.T) {
	var mu sync.Mutex
	var versions []string
	api := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).
		WithObjects(agentNode("node-b", "192.0.2.2"), agentNode("node-c", "192.0.2.3")).
		WithInterceptorFuncs(interceptor.Funcs{Get: func(ctx context.Context, cl client.WithWatch, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
			var o client.GetOptions
			o.ApplyOptions(opts)
			mu.Lock()
			defer mu.Unlock()
			if o.Raw == nil {
				versions = append(versions, "(quorum)")
			} else {
				versions = append(versions, o.Raw.ResourceVersion)
			}
			return cl.Get(ctx, key, obj, opts...)
		}}).Build()
	u := &Unviewed{Direct: api, Members: func() []string { return []string{"node-b", "node-c"} }}
	u.Ask("node-x") // not there: read all the same
	if got := u.nodes(context.Background(), map[string]bool{}); len(got) != 2 {
		t.Fatalf("read %d Nodes, want node-b and node-c", len(got))
	}
	if want := []string{"0", "0", "0"}; !slices.Equal(versions, want) {
		t.Errorf("GETs asked for resourceVersions %q, want %q", versions, want)
	}
}
