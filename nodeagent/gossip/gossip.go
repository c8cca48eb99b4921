package gossip

import (
	"bytes"
	"cmp"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"sync/atomic"
	"time"

	"github.com/hashicorp/memberlist"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,resourceNames=vip-allocator-memberlist,namespace=vip-allocator-operator

// SettleAlone is how long an agent that sees no other agent waits before it
// announces anything: long enough for agents started together to find each other.
const SettleAlone = 5 * time.Second

// KeyPoll is how often the agent reads the gossip Secret for a
// rotation step (--gossip-key-poll): wait at least this between the steps,
// and until every agent shows the step.
const KeyPoll = 30 * time.Second

// Liveness timer presets (the agent's --liveness-timers flag).
const (
	TimersTuned = "tuned" // about a second to declare a dead node dead
	TimersLAN   = "lan"   // memberlist's defaults, about five: the baseline of make bench-failover
)

// Timers is a named preset of failure-detection timers.
func Timers(preset string) (membership.Timers, error) {
	switch preset {
	case "", TimersTuned:
		return membership.TunedTimers(), nil
	case TimersLAN:
		return membership.TimersOf(memberlist.DefaultLANConfig()), nil
	}
	return membership.Timers{}, fmt.Errorf("--liveness-timers %q: want %s or %s", preset, TimersTuned, TimersLAN)
}

// Liveness adapts membership to what the announcer needs (announce.Liveness).
type Liveness struct{ Cluster *membership.Cluster }

// AliveDraining maps each member the cluster knows to whether it is draining.
func (l Liveness) AliveDraining() map[string]bool {
	out := map[string]bool{}
	for name, st := range l.Cluster.Members() {
		out[name] = st == membership.Draining
	}
	return out
}

// Changed is the cluster's notice of a change among its members.
func (l Liveness) Changed() <-chan struct{} { return l.Cluster.Changed() }

// Keys reads the agents' keys, primary first, from the Secret the
// operator creates, waiting a minute for it on a fresh install.
func Keys(ctx context.Context, c client.Reader, namespace string) ([][]byte, error) {
	var secret corev1.Secret
	name := client.ObjectKey{Namespace: namespace, Name: paasv1.MemberlistSecret}
	err := wait.PollUntilContextTimeout(ctx, 2*time.Second, time.Minute, true, func(ctx context.Context) (bool, error) {
		err := c.Get(ctx, name, &secret)
		if err != nil {
			ctrl.Log.Info("waiting for the gossip key Secret (the operator creates it)", "secret", name, "error", err.Error())
		}
		return err == nil, nil
	})
	if err != nil {
		return nil, fmt.Errorf("read Secret %s (created by the operator; is it running?): %w", name, err)
	}
	keys, err := parseKeys(secret.Data)
	if err != nil {
		return nil, fmt.Errorf("Secret %s: %w", name, err)
	}
	return keys, nil
}

// parseKeys reads the gossip Secret's data: the list under
// MemberlistKeys (base64, one a line, primary first) when there is one, else
// the single raw key under MemberlistKey.
func parseKeys(data map[string][]byte) ([][]byte, error) {
	list, isList := data[paasv1.MemberlistKeys]
	if !isList {
		key := data[paasv1.MemberlistKey]
		if n := len(key); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("key %q holds %d bytes, want 16, 24 or 32", paasv1.MemberlistKey, n)
		}
		return [][]byte{key}, nil
	}
	var keys [][]byte
	for i, line := range strings.Fields(string(list)) {
		key, err := base64.StdEncoding.DecodeString(line)
		if err != nil {
			return nil, fmt.Errorf("%q line %d: not base64: %w", paasv1.MemberlistKeys, i+1, err)
		}
		if n := len(key); n != 16 && n != 24 && n != 32 {
			return nil, fmt.Errorf("%q line %d: %d bytes, want 16, 24 or 32", paasv1.MemberlistKeys, i+1, n)
		}
		if !slices.ContainsFunc(keys, func(k []byte) bool { return bytes.Equal(k, key) }) {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%q holds no key", paasv1.MemberlistKeys)
	}
	return keys, nil
}

// FollowKeys reads the gossip Secret every period and installs what it
// holds (a rotation step), until ctx ends. A Secret that cannot be read or
// parsed changes nothing: the keys in use stay.
func FollowKeys(ctx context.Context, c client.Reader, namespace string, cluster *membership.Cluster, period time.Duration) {
	name := client.ObjectKey{Namespace: namespace, Name: paasv1.MemberlistSecret}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		var secret corev1.Secret
		if err := c.Get(ctx, name, &secret); err != nil {
			ctrl.Log.Error(err, "read the gossip keys; keeping the ones in use", "secret", name)
			return
		}
		keys, err := parseKeys(secret.Data)
		if err == nil {
			before := cluster.Keys()
			if err = cluster.SetKeys(keys); err == nil && !slices.Equal(before, cluster.Keys()) {
				ctrl.Log.Info("gossip keys changed", "primary", cluster.Keys()[0], "installed", cluster.Keys(), "before", before)
			}
		}
		if err != nil {
			ctrl.Log.Error(err, "gossip keys refused; keeping the ones in use", "secret", name)
		}
		setKeyMetric(cluster.Keys())
	}, period)
}

// BindAddress is the flag's address or else the Node's first InternalIP.
func BindAddress(ctx context.Context, c client.Reader, node, flag string) (netip.Addr, error) {
	if flag != "" {
		return netip.ParseAddr(flag)
	}
	var n corev1.Node
	if err := c.Get(ctx, client.ObjectKey{Name: node}, &n); err != nil {
		return netip.Addr{}, fmt.Errorf("get Node %s for its address: %w", node, err)
	}
	if ips := election.InternalIPs(&n); len(ips) > 0 {
		return ips[0], nil
	}
	return netip.Addr{}, fmt.Errorf("Node %s has no InternalIP: set --bind-address", node)
}

// A round of joins runs every joinEvery, and sooner when kicked (a member
// this agent could not place), but at most once per joinMinGap: a flood of
// unknown names on the gossip costs at most that many rounds.
const (
	joinEvery  = 5 * time.Second
	joinMinGap = 200 * time.Millisecond
)

// JoinRounds runs round now, then every joinEvery or on a kick (with
// joinMinGap between rounds), until ctx ends.
func JoinRounds(ctx context.Context, kick <-chan struct{}, round func()) {
	tick := time.NewTicker(joinEvery)
	defer tick.Stop()
	for {
		round()
		select {
		case <-ctx.Done():
			return
		case <-time.After(joinMinGap):
		}
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-kick:
		}
	}
}

// Settled reports whether this agent's view of the others is worth acting
// on (announce.Announcer.Settled): once another agent is seen and every node
// this agent knows is counted in the gossip (agents started together would
// otherwise elect from different members), or SettleAlone after started (the
// first agent of a cluster, a one-node cluster, a node whose agent is down);
// and settled for good: an agent dying later must not stop the others from
// taking its VIPs.
func Settled(cluster *membership.Cluster, index *nodes.Index, started time.Time) func() bool {
	return latched(func() bool {
		members := cluster.Members()
		return len(members) > 1 && index.AllIn(members) || time.Since(started) > SettleAlone
	})
}

// latched is cond until it first holds, then true for good.
func latched(cond func() bool) func() bool {
	var held atomic.Bool
	return func() bool {
		if held.Load() {
			return true
		}
		if cond() {
			held.Store(true)
			return true
		}
		return false
	}
}

// JoinOthers joins the agents of the Nodes not in the membership yet,
// after refreshing index (the addresses members are admitted from); list
// reads the Nodes (nodes.List).
func JoinOthers(ctx context.Context, list func(context.Context) ([]corev1.Node, error), cluster *membership.Cluster, self string, index *nodes.Index) {
	nodes, err := list(ctx)
	if err != nil {
		ctrl.Log.Error(err, "list Nodes to join their agents")
		return
	}
	index.Update(nodes)
	members := cluster.Members()
	var addrs []string
	for i := range nodes {
		n := &nodes[i]
		if _, in := members[n.Name]; in || n.Name == self {
			continue
		}
		if ips := election.InternalIPs(n); len(ips) > 0 {
			addrs = append(addrs, ips[0].String())
		}
	}
	if len(addrs) == 0 {
		return
	}
	if joined, err := cluster.Join(addrs); err != nil && joined == 0 {
		ctrl.Log.V(1).Info("no other agent reachable yet", "tried", len(addrs), "error", err.Error())
	}
}

// portInUse says what most likely holds the gossip port on this node
// and how to move the agents off it: MetalLB's speakers run a memberlist on
// the node's address too, on the same default port, and the migration from
// MetalLB runs both side by side.
func portInUse(port int) string {
	return fmt.Sprintf("another process on this node holds port %d: most likely another memberlist gossip, such as MetalLB's speaker (port 7946 unless its METALLB_ML_BIND_PORT, Helm speaker.memberlist.mlBindPort, is set). "+
		"Give the agents a port free on every node with the operator's --agent-args=--memberlist-port=%d, or move the other gossip", port, port+1)
}

// Start starts this agent's gossip and shows its keys (the gossip keys
// metric). A port another process holds is named with what most likely
// holds it, and how to move off it.
func Start(cfg membership.Config) (*membership.Cluster, error) {
	cluster, err := membership.Start(cfg)
	if errors.Is(err, membership.ErrPortInUse) {
		return nil, fmt.Errorf("start liveness gossip on %s: %w; %s", cfg.BindAddr, err, portInUse(cmp.Or(cfg.Port, membership.DefaultPort)))
	}
	if err != nil {
		return nil, fmt.Errorf("start liveness gossip on %s: %w", cfg.BindAddr, err)
	}
	setKeyMetric(cluster.Keys())
	return cluster, nil
}
