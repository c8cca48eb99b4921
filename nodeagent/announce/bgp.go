package announce

import (
	"context"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
)

// BGPAnnouncer is the BGP side of the announcer: it keeps the node's speaker
// peering with the BGPPeers that select the node and advertising the VIPs of
// BGP-mode groups the node may carry, and reports the sessions on the
// BGPPeers' status and the advertising nodes on the ledger.
type BGPAnnouncer struct {
	Client   client.Client
	NodeName string
	Speaker  *bgp.Speaker
	// Passwords reads the peers' TCP MD5 passwords by peer name, from the
	// Secret the operator fills (see paasv1.BGPPasswordsSecret).
	Passwords func(ctx context.Context) (map[string]string, error)
	// LocalAddresses reads this node's own addresses, of which a source
	// address its Node names must be one (nil: its interfaces').
	LocalAddresses func() (map[netip.Addr]string, error)
	// GracefulShutdown is how long a route this node stops advertising
	// because it is cordoned, draining or excluded is advertised in graceful
	// shutdown before its withdrawal (see bgpGracefulShutdown); 0: withdrawn
	// at once.
	GracefulShutdown time.Duration
	// HistoryLimit is how many changes each IP object keeps in
	// status.history (0: DefaultHistoryLimit; at most MaxHistoryLimit).
	HistoryLimit int

	// prev are the routes the last pass decided (unmarked), leaving those in
	// graceful shutdown; only apply (the announcer's one worker) uses them.
	prev    []bgp.Route
	leaving map[netip.Prefix]leavingRoute

	mu sync.Mutex
	// withdrawAt is when the first route in graceful shutdown is withdrawn
	// (zero: none is).
	withdrawAt time.Time
	// records is what this node writes on the ledger about the BGP VIPs.
	records advertiserRecords
	// routes is the last change of this node's route for each BGP VIP
	// (see advertiserEntries).
	routes  map[netip.Addr]routeChange
	wake    chan struct{}
	skipped map[string]string // peers left out, logged once per reason
}

// +kubebuilder:rbac:groups=paas.org,resources=bgppeers,verbs=get;list;watch
// +kubebuilder:rbac:groups=paas.org,resources=bgppeers/status,verbs=get;patch

// apply converges the speaker: peering with the BGPPeers that select node
// (nil: not in the cache, an error) and advertising routes; the records are
// written apart (RecordAdvertisers).
func (b *BGPAnnouncer) apply(ctx context.Context, node *corev1.Node, peers []paasv1.BGPPeer, routes []bgp.Route, records advertiserRecords) error {
	if node == nil {
		return fmt.Errorf("get Node %s: not found", b.NodeName)
	}
	var passwords map[string]string
	if slices.ContainsFunc(peers, func(p paasv1.BGPPeer) bool { return p.Spec.PasswordSecret != nil }) {
		var err error
		if passwords, err = b.Passwords(ctx); err != nil {
			// passwords are the last read: the sessions keep theirs.
			ctrl.LoggerFrom(ctx).Error(err, "read the BGP passwords; the last ones read stay in use")
		}
	}
	cfg, skipped := bgpPeersOf(node, peers, passwords, nodeIdentityOf(node, func() (map[netip.Addr]string, error) {
		return nodes.OwnAddresses(b.LocalAddresses)
	}))
	b.logSkipped(ctx, skipped)
	if err := b.Speaker.Configure(ctx, cfg); err != nil {
		return fmt.Errorf("configure BGP: %w", err)
	}
	now := time.Now()
	advertise, leaving, requeue := bgpGracefulShutdown(routes, b.prev, b.leaving, records.drained, now, b.GracefulShutdown)
	if entered := len(leaving) - overlap(leaving, b.leaving); entered > 0 {
		ctrl.LoggerFrom(ctx).Info("routes in graceful shutdown before their withdrawal", "routes", entered, "for", b.GracefulShutdown)
	}
	flips := routeFlips(b.prev, routes)
	b.prev, b.leaving = routes, leaving
	b.mu.Lock()
	b.withdrawAt = time.Time{}
	if requeue > 0 {
		b.withdrawAt = now.Add(requeue)
	}
	b.mu.Unlock()
	if err := b.Speaker.Advertise(ctx, advertise); err != nil {
		return fmt.Errorf("advertise: %w", err)
	}
	b.noteRoutes(flips, records.noticed, time.Now())
	bgpRoutes.Set(float64(len(advertise)))
	b.setRecords(records)
	return nil
}

// noteRoutes remembers the route changes an Advertise call that returned at
// done made, noticed at noticed.
func (b *BGPAnnouncer) noteRoutes(flips map[netip.Addr]bool, noticed, done time.Time) {
	if len(flips) == 0 {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.routes == nil {
		b.routes = map[netip.Addr]routeChange{}
	}
	for vip, advertised := range flips {
		b.routes[vip] = routeChange{noticed: noticed, done: done, advertised: advertised}
	}
}

func (b *BGPAnnouncer) logSkipped(ctx context.Context, skipped map[string]string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for name, why := range skipped {
		if b.skipped[name] != why {
			ctrl.LoggerFrom(ctx).Info("not peering with a BGPPeer", "peer", name, "reason", why)
		}
	}
	b.skipped = skipped
}

// passwordRetry is how soon a pass comes back for a peer waiting for its
// password: no event tells the agent the operator copied it.
const passwordRetry = 5 * time.Second

// unconfiguredRetry is how soon a pass comes back for a peer the speaker
// could not configure.
const unconfiguredRetry = time.Second

// overlap is how many keys of a are in b.
func overlap(a, b map[netip.Prefix]leavingRoute) int {
	n := 0
	for p := range a {
		if _, ok := b[p]; ok {
			n++
		}
	}
	return n
}

// retryAfter is when the next pass must come at the latest (0: no need): to
// withdraw the routes in graceful shutdown, or for a password.
func (b *BGPAnnouncer) retryAfter() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	var after time.Duration
	if !b.withdrawAt.IsZero() {
		after = max(time.Until(b.withdrawAt), 10*time.Millisecond)
	}
	for _, why := range b.skipped {
		if why == passwordNotYet && (after == 0 || passwordRetry < after) {
			after = passwordRetry
		}
	}
	// A peer the speaker could not configure (an unnumbered peer's router
	// not found yet): no event says when it can.
	if b.Speaker.Unconfigured() && (after == 0 || unconfiguredRetry < after) {
		after = unconfiguredRetry
	}
	return after
}

// skippedSessions are the entries of the peers this node left out (a
// duplicate address, a password not there yet): each says so on its own
// BGPPeer's status.
func (b *BGPAnnouncer) skippedSessions() []bgp.Session {
	b.mu.Lock()
	defer b.mu.Unlock()
	out := make([]bgp.Session, 0, len(b.skipped))
	for name, why := range b.skipped {
		out = append(out, bgp.Session{Peer: name, State: "Idle", Message: "not peering: " + why, BFD: paasv1.BFDNotConfigured})
	}
	return out
}

func (b *BGPAnnouncer) setRecords(records advertiserRecords) {
	b.mu.Lock()
	b.records = records
	// A VIP no longer among the BGP VIPs has no change left to record.
	maps.DeleteFunc(b.routes, func(vip netip.Addr, _ routeChange) bool { _, ok := records.listed[vip]; return !ok })
	if b.wake == nil {
		b.wake = make(chan struct{}, 1)
	}
	wake := b.wake
	b.mu.Unlock()
	select {
	case wake <- struct{}{}:
	default:
	}
}

// RecordAdvertisers writes, until ctx ends, the advertisers of the VIPs this
// node records on their ledger objects. It runs apart from advertising so
// that a thousand status writes never hold back a withdrawal.
func (b *BGPAnnouncer) RecordAdvertisers(ctx context.Context) error {
	b.setRecords(advertiserRecords{})
	tick := time.NewTicker(30 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-b.wake:
		case <-tick.C:
		}
		b.mu.Lock()
		records := b.records
		b.mu.Unlock()
		conflicted := false
		for vip, listed := range records.listed {
			if ctx.Err() != nil {
				return nil
			}
			keep, prune := records.pruned[vip]
			err := b.record(ctx, vip, records, listed, prune, keep)
			conflicted = conflicted || apierrors.IsConflict(err)
			if err != nil && !apierrors.IsConflict(err) {
				ctrl.LoggerFrom(ctx).Error(err, "record the advertisers of a VIP", "vip", vip)
			}
		}
		if conflicted {
			// Another node wrote the same IP meanwhile: look again soon.
			time.AfterFunc(time.Second, func() { b.setRecords(records) })
		}
	}
}

// record writes this node's part of vip's advertisers (see nextAnnouncedBy)
// as the pass that decided records saw them, and each change it makes in
// the VIP's history (advertiserEntries). Several nodes write one list: each
// write carries the resourceVersion it read, and a conflict is retried.
func (b *BGPAnnouncer) record(ctx context.Context, vip netip.Addr, records advertiserRecords, listed, prune bool, keep []string) error {
	var ip paasv1.IP
	if err := b.Client.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(vip)}, &ip); err != nil {
		return client.IgnoreNotFound(err)
	}
	nodes := nextAnnouncedBy(ip.Status.AnnouncedBy, b.NodeName, listed, prune, keep)
	if slices.Equal(ip.Status.AnnouncedBy, nodes) || len(ip.Status.AnnouncedBy) == 0 && len(nodes) == 0 {
		return nil
	}
	b.mu.Lock()
	route, ok := b.routes[vip]
	b.mu.Unlock()
	entries := advertiserEntries(b.NodeName, ip.Status.AnnouncedBy, nodes, records.alive, records.noticed, route, ok)
	patch := client.MergeFromWithOptions(ip.DeepCopy(), client.MergeFromWithOptimisticLock{})
	ip.Status.AnnouncedBy = nodes
	for _, e := range entries {
		ip.Status.History = appendHistory(ip.Status.History, e, b.HistoryLimit)
	}
	if err := b.Client.Status().Patch(ctx, &ip, patch); err != nil {
		return fmt.Errorf("record %s as advertised by %v: %w", vip, nodes, err)
	}
	for _, e := range entries {
		ctrl.LoggerFrom(ctx).Info("advertisers changed", "vip", vip, "from", e.From, "to", e.To, "cause", e.Cause, "gapMilliseconds", e.GapMilliseconds)
	}
	return nil
}

// ReportSessions writes this node's entry of each BGPPeer's status.sessions
// whenever a session changes (and every few seconds, for prefix counts),
// until ctx ends. Each agent applies its own entry with its own field
// manager (server-side apply), so agents never overwrite each other.
func (b *BGPAnnouncer) ReportSessions(ctx context.Context) error {
	written := map[string]paasv1.BGPSession{}
	tick := time.NewTicker(5 * time.Second)
	defer tick.Stop()
	for {
		seen := map[string]bool{}
		for _, s := range append(b.Speaker.Sessions(ctx), b.skippedSessions()...) {
			seen[s.Peer] = true
			bgpSessionUp.WithLabelValues(s.Peer).Set(boolGauge(s.State == bgp.Established))
			bgpPrefixesSent.WithLabelValues(s.Peer).Set(float64(s.PrefixesSent))
			if s.BFD == paasv1.BFDNotConfigured {
				bfdSessionUp.DeleteLabelValues(s.Peer)
			} else {
				bfdSessionUp.WithLabelValues(s.Peer).Set(boolGauge(s.BFD == paasv1.BFDUp))
			}
			entry := paasv1.BGPSession{Node: b.NodeName, State: s.State, PrefixesSent: int32(s.PrefixesSent), Message: s.Message,
				BFD: s.BFD, BFDMessage: s.BFDMessage, LocalASN: int64(s.LocalASN)}
			if s.RouterID.IsValid() {
				entry.RouterID = s.RouterID.String()
			}
			if s.Source.IsValid() {
				entry.SourceAddress = s.Source.String()
			}
			if old, ok := written[s.Peer]; ok && old.State == s.State {
				entry.Since = old.Since // keep the time the state was entered
			}
			if !s.Since.IsZero() {
				entry.Since = &metav1.Time{Time: s.Since.Truncate(time.Second)}
			} else if entry.Since == nil {
				entry.Since = &metav1.Time{Time: time.Now().Truncate(time.Second)}
			}
			if old, ok := written[s.Peer]; ok && sameSession(old, entry) {
				continue
			}
			if err := b.ApplySession(ctx, s.Peer, &entry); err != nil {
				ctrl.LoggerFrom(ctx).Error(err, "report a BGP session", "peer", s.Peer)
				continue
			}
			written[s.Peer] = entry
		}
		for peer := range written {
			if !seen[peer] {
				bgpSessionUp.DeleteLabelValues(peer)
				bgpPrefixesSent.DeleteLabelValues(peer)
				bfdSessionUp.DeleteLabelValues(peer)
				if err := b.ApplySession(ctx, peer, nil); client.IgnoreNotFound(err) != nil {
					ctrl.LoggerFrom(ctx).Error(err, "remove a BGP session from the status", "peer", peer)
					continue
				}
				delete(written, peer)
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-b.Speaker.Changed():
		case <-tick.C:
		}
	}
}

func sameSession(a, b paasv1.BGPSession) bool {
	return a.State == b.State && a.PrefixesSent == b.PrefixesSent && a.Message == b.Message && a.Since.Equal(b.Since) &&
		a.BFD == b.BFD && a.BFDMessage == b.BFDMessage && a.LocalASN == b.LocalASN && a.RouterID == b.RouterID && a.SourceAddress == b.SourceAddress
}

// CountBFDChange is the speaker's OnBFDChange: the state-change counter.
func CountBFDChange(c bgp.BFDChange) {
	bfdStateChanges.WithLabelValues(c.Peer, c.State).Inc()
}

// ApplySession applies this node's session entry of peer (nil: none).
func (b *BGPAnnouncer) ApplySession(ctx context.Context, peer string, s *paasv1.BGPSession) error {
	u := &unstructured.Unstructured{}
	u.SetAPIVersion(paasv1.GroupVersion.String())
	u.SetKind("BGPPeer")
	u.SetName(peer)
	sessions := []any{}
	if s != nil {
		obj, err := runtime.DefaultUnstructuredConverter.ToUnstructured(s)
		if err != nil {
			return err
		}
		sessions = append(sessions, obj)
	}
	if err := unstructured.SetNestedSlice(u.Object, sessions, "status", "sessions"); err != nil {
		return err
	}
	return b.Client.Status().Apply(ctx, client.ApplyConfigurationFromUnstructured(u),
		client.FieldOwner("vip-allocator-agent/"+b.NodeName), client.ForceOwnership)
}

func boolGauge(b bool) float64 {
	if b {
		return 1
	}
	return 0
}
