package nodes

import (
	"context"
	"fmt"
	"sync"
	"time"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/internal/nodeview"
)

// How the agent reads the other nodes: not from their Nodes, which
// every kubelet rewrites every few minutes and which would cost every agent
// every report of every node, but from their NodeViews, which each node's
// agent writes for its own node (nodeview_publisher.go), and the operator for
// the nodes whose agents do not, and which change only when what the agents
// read changes. List is the one adapter:
// it gives the election, trust and the node index the Nodes they always
// read, so none of them knows where a Node came from.

// How long the agent trusts a Node it read itself because it has no view
// (Unviewed): a change of such a node
// (cordon, labels) reaches it this much later than the old agents, who watch
// it. At least unviewedMinTTL, and long enough that reading them all again
// costs at most unviewedGetsPerSecond: 10 s for up to 50 such nodes, 200 s
// for 1,000 (5 GETs a second per agent, while views are missing).
const (
	unviewedMinTTL        = 10 * time.Second
	unviewedGetsPerSecond = 5
)

// unviewedTTL is the TTL when n nodes are read without a view.
func unviewedTTL(n int) time.Duration {
	return max(unviewedMinTTL, time.Duration(n)*time.Second/unviewedGetsPerSecond)
}

// maxAsked bounds the names gossip may make the agent look up.
const maxAsked = 4096

// FromWatchCache makes a GET read the API server's watch cache (resourceVersion
// "0") instead of a quorum read from etcd: with the operator down at the worst
// point of a rolling upgrade of 2,000 nodes, the upgraded agents would make
// some 10,000 of these GETs a second between them (docs/performance.md), and
// a Node as stale as the watch cache (milliseconds behind etcd) is far fresher
// than the unviewedTTL the agent keeps it anyway.
var FromWatchCache = &client.GetOptions{Raw: &metav1.GetOptions{ResourceVersion: "0"}}

// List is every Node as the agent reads them: the Nodes c holds (the
// agent's cache holds only its own; nodeOpts narrow a direct list the same
// way), a Node read from its NodeView for every other node that has one,
// and, from unviewed (nil: none), the nodes whose agents publish no view.
// viewed names the nodes read from a NodeView: what a node's agent publishes
// about it, which may cost only that node (nodeAddresses does not read them).
func List(ctx context.Context, c client.Reader, unviewed *Unviewed, nodeOpts ...client.ListOption) (out []corev1.Node, viewed map[string]bool, err error) {
	var nodes corev1.NodeList
	if err := c.List(ctx, &nodes, nodeOpts...); err != nil {
		return nil, nil, fmt.Errorf("list Nodes: %w", err)
	}
	var views paasv1.NodeViewList
	if err := c.List(ctx, &views); err != nil {
		return nil, nil, fmt.Errorf("list NodeViews: %w", err)
	}
	out, viewed = nodes.Items, make(map[string]bool, len(views.Items))
	have := make(map[string]bool, len(nodes.Items)+len(views.Items))
	for i := range nodes.Items {
		have[nodes.Items[i].Name] = true
	}
	for i := range views.Items {
		if v := &views.Items[i]; !have[v.Name] {
			have[v.Name], viewed[v.Name] = true, true
			out = append(out, nodeview.Node(v))
		}
	}
	if unviewed != nil {
		out = append(out, unviewed.nodes(ctx, have)...)
	}
	return out, viewed, nil
}

// ListOnly is List for the readers that do not ask where a Node
// was read from (gossip admission, the election).
func ListOnly(ctx context.Context, c client.Reader, unviewed *Unviewed, nodeOpts ...client.ListOption) ([]corev1.Node, error) {
	nodes, _, err := List(ctx, c, unviewed, nodeOpts...)
	return nodes, err
}

// Unviewed reads, straight from the API server, the Nodes that have no
// NodeView: the operator publishes the views of the agents that publish none
// (a rolling upgrade), so these are the nodes added, or whose view was
// deleted, while the operator is down. The agent cannot list every Node to find them (that is the traffic
// the views remove), so it looks up only the nodes it has a reason to know:
// the agents alive in the gossip, the members the gossip named that the
// agent could not place (ask), and the nodes it read before (so an old agent
// that dies stays counted towards the majority). Each Node read is kept
// unviewedTTL; once a node has a view it is no longer read. Its zero value
// reads nothing: no direct reader.
type Unviewed struct {
	Direct  client.Reader   // the API server; each GET is served from its watch cache
	Members func() []string // the agents alive in the gossip (nil: none)
	now     func() time.Time

	mu         sync.Mutex
	read       map[string]nodeRead
	asked      map[string]bool
	firstReads *rate.Limiter // of asked names never read (nodes)
	ttl        time.Duration // of the last listing; 0: no node without a view
}

// RefreshEvery is how often the Nodes read without a view are read again (0:
// there are none): the announcer passes as often, since no event tells it of
// their changes.
func (u *Unviewed) RefreshEvery() time.Duration {
	if u == nil {
		return 0
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.ttl
}

// nodeRead is a Node as read at a time; node is nil when there was none.
type nodeRead struct {
	node *corev1.Node
	at   time.Time
}

// Ask makes the next listing look name up: a gossip member named it and no
// Node or view of it is known.
func (u *Unviewed) Ask(name string) {
	u.mu.Lock()
	defer u.mu.Unlock()
	if u.asked == nil {
		u.asked = map[string]bool{}
	}
	if len(u.asked) < maxAsked {
		u.asked[name] = true
	}
}

// nodes are the Nodes of the nodes u has a reason to know and have does
// not hold, each read again once older than unviewedTTL. A Node that cannot
// be read now keeps its last copy, if any, until it can.
func (u *Unviewed) nodes(ctx context.Context, have map[string]bool) []corev1.Node {
	now := time.Now
	if u.now != nil {
		now = u.now
	}
	// The members are read before u.mu is taken: memberlist asks (ask,
	// through the gossip's admission) while it holds its own lock, which
	// Members needs too; taking them in the other order here deadlocked an
	// agent's gossip and announcer.
	var members []string
	if u.Members != nil {
		members = u.Members()
	}
	u.mu.Lock()
	wanted, stale, ttl := u.wantedLocked(members, have, now)
	u.mu.Unlock()
	if u.Direct == nil {
		return nil
	}
	fetched := u.fetch(ctx, stale, now)
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.keepLocked(stale, fetched, wanted, ttl)
}

// wantedLocked picks the nodes to list (wanted: the asked ones within the
// first-read budget, the members, those read before; none that have holds),
// forgets the reads no longer wanted once older than the TTL, and names the
// wanted ones to read again (stale). u.mu is held.
func (u *Unviewed) wantedLocked(members []string, have map[string]bool, now func() time.Time) (wanted map[string]bool, stale []string, ttl time.Duration) {
	if u.read == nil {
		u.read = map[string]nodeRead{}
	}
	wanted = map[string]bool{}
	// A name the gossip asked about is read the first time within a budget:
	// a fleet's worth at once (an agent starting amid a rolling upgrade),
	// then unviewedGetsPerSecond; the rest waits, asked, for a later
	// listing. Without it a key holder naming invented members on every
	// round of joins would turn each agent into a GET amplifier.
	if u.firstReads == nil {
		u.firstReads = rate.NewLimiter(unviewedGetsPerSecond, maxAsked)
	}
	for name := range u.asked {
		if _, read := u.read[name]; read || have[name] || u.firstReads.AllowN(now(), 1) {
			wanted[name] = true
			delete(u.asked, name)
		}
	}
	for _, name := range members {
		wanted[name] = true
	}
	for name, r := range u.read {
		if r.node != nil {
			wanted[name] = true
		}
	}
	for name := range wanted {
		if have[name] {
			delete(wanted, name)
			delete(u.read, name) // its agent publishes a view now
		}
	}
	ttl = unviewedTTL(len(wanted))
	for name, r := range u.read {
		if !wanted[name] && now().Sub(r.at) >= ttl {
			delete(u.read, name) // a Node that was not there, asked about no more
		}
	}
	for name := range wanted {
		if r, ok := u.read[name]; !ok || now().Sub(r.at) >= ttl {
			stale = append(stale, name)
		}
	}
	return wanted, stale, ttl
}

// fetch reads the Nodes named in stale from the API server's watch cache, a
// few at once: each result nil when the read failed (the last copy stays).
func (u *Unviewed) fetch(ctx context.Context, stale []string, now func() time.Time) []*nodeRead {
	fetched := make([]*nodeRead, len(stale))
	_ = fanout.Run(8, len(stale), func(i int) error {
		var n corev1.Node
		err := u.Direct.Get(ctx, client.ObjectKey{Name: stale[i]}, &n, FromWatchCache)
		switch {
		case err == nil:
			trimmed := nodeview.Trim(&n)
			fetched[i] = &nodeRead{node: &trimmed, at: now()}
		case apierrors.IsNotFound(err):
			fetched[i] = &nodeRead{at: now()}
		default:
			ctrl.LoggerFrom(ctx).V(1).Info("read the Node of an agent that publishes no view", "node", stale[i], "error", err.Error())
		}
		return nil
	})
	return fetched
}

// keepLocked records what fetch read and returns the wanted Nodes known to
// exist, setting the TTL RefreshEvery reports. u.mu is held.
func (u *Unviewed) keepLocked(stale []string, fetched []*nodeRead, wanted map[string]bool, ttl time.Duration) []corev1.Node {
	for i, r := range fetched {
		if r != nil {
			u.read[stale[i]] = *r
		}
	}
	var out []corev1.Node
	for name := range wanted {
		if r, ok := u.read[name]; ok && r.node != nil {
			out = append(out, *r.node.DeepCopy())
		}
	}
	u.ttl = 0
	if len(out) > 0 {
		u.ttl = ttl
	}
	return out
}
