package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
)

// stopLog records, in order, what the shutdown protocol does to the gossip,
// the L2 speaker and the BGP speaker.
type stopLog struct{ calls []string }

func (l *stopLog) add(format string, args ...any) {
	l.calls = append(l.calls, fmt.Sprintf(format, args...))
}

type fakeGossip struct{ log *stopLog }

func (g fakeGossip) SetState(s membership.State) error { g.log.add("gossip: %s", s); return nil }
func (g fakeGossip) Leave(time.Duration) error         { g.log.add("gossip: leave"); return nil }
func (g fakeGossip) Shutdown() error                   { g.log.add("gossip: shutdown"); return nil }

type fakeL2 struct{ log *stopLog }

func (s fakeL2) Close() { s.log.add("l2: quiet") }

type fakeBGP struct {
	log *stopLog
	// left is, if not nil, set to the time the context given to Shutdown had left.
	left *time.Duration
}

func (b fakeBGP) Shutdown(ctx context.Context, restarting bool) {
	if b.left != nil {
		deadline, _ := ctx.Deadline()
		*b.left = time.Until(deadline)
	}
	if restarting {
		b.log.add("bgp: close sessions without graceful restart")
	} else {
		b.log.add("bgp: withdraw and close")
	}
}
func (b fakeBGP) Stop(context.Context) { b.log.add("bgp: close every session") }

func TestShutdownProtocol(t *testing.T) {
	ready := func(mut func(*corev1.Node)) *corev1.Node {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
		if mut != nil {
			mut(n)
		}
		return n
	}
	now := metav1.Now()
	handover := []string{"gossip: Draining", "bgp: withdraw and close", "sleep 2s", "l2: quiet", "gossip: leave", "gossip: shutdown"}
	restart := []string{"gossip: Restarting", "bgp: close sessions without graceful restart", "l2: quiet", "gossip: shutdown"}
	for _, tc := range []struct {
		desc   string
		onStop string
		node   *corev1.Node
		err    error
		want   []string
	}{
		{"auto, node Ready and schedulable: a restart, nothing moves", OnStopAuto, ready(nil), nil, restart},
		{"auto, node cordoned (drain): hand over", OnStopAuto, ready(func(n *corev1.Node) { n.Spec.Unschedulable = true }), nil, handover},
		{"auto, node being deleted: hand over", OnStopAuto, ready(func(n *corev1.Node) { n.DeletionTimestamp = &now; n.Finalizers = []string{"x"} }), nil, handover},
		{"auto, node not Ready (graceful node shutdown): hand over", OnStopAuto, ready(func(n *corev1.Node) {
			n.Status.Conditions[0].Status = corev1.ConditionFalse
		}), nil, handover},
		{"auto, the API server cannot tell: hand over (safe), not hold", OnStopAuto, nil, errors.New("connection refused"), handover},
		{"handover: always, whatever the node", OnStopHandover, ready(nil), nil, handover},
		{"restart: always, whatever the node", OnStopRestart, ready(func(n *corev1.Node) { n.Spec.Unschedulable = true }), nil, restart},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			log := &stopLog{}
			asked := 0
			s := &shutdown{gossip: fakeGossip{log}, l2: fakeL2{log}, bgp: fakeBGP{log: log}, handoverDelay: 2 * time.Second,
				sleep: func(d time.Duration) { log.add("sleep %s", d) }, log: logr.Discard(),
				leaving: leavingPolicy(tc.onStop, func() (*corev1.Node, error) { asked++; return tc.node, tc.err })}
			// The signal: the others are told at once, before the manager stops.
			s.announce()
			if len(log.calls) != 1 || log.calls[0] != tc.want[0] {
				t.Fatalf("on the signal: %v, want only %q", log.calls, tc.want[0])
			}
			s.announce() // a second signal changes nothing
			s.finish()
			if !slices.Equal(log.calls, tc.want) {
				t.Errorf("protocol:\n got %q\nwant %q", log.calls, tc.want)
			}
			if wantAsked := map[bool]int{true: 1, false: 0}[tc.onStop == OnStopAuto]; asked != wantAsked {
				t.Errorf("asked for the node %d times, want %d", asked, wantAsked)
			}
		})
	}
}

// TestShutdownGracefulShutdownTime: leaving, BGP is given its graceful
// shutdown time on top of the usual; restarting, it is not (the routes stay).
func TestShutdownGracefulShutdownTime(t *testing.T) {
	for _, onStop := range []string{OnStopHandover, OnStopRestart} {
		var left time.Duration
		log := &stopLog{}
		s := &shutdown{gossip: fakeGossip{log}, l2: fakeL2{log}, bgp: fakeBGP{log: log, left: &left}, bgpGracefulShutdown: 5 * time.Second,
			sleep: func(time.Duration) {}, log: logr.Discard(), leaving: leavingPolicy(onStop, nil)}
		s.finish()
		if onStop == OnStopHandover && left < 7*time.Second {
			t.Errorf("leaving: BGP had %s to shut down, want the graceful shutdown time (5s) and more", left)
		}
		if onStop == OnStopRestart && left > 3*time.Second {
			t.Errorf("restarting: BGP had %s to shut down, want no graceful shutdown time", left)
		}
	}
}

func TestShutdownFinishWithoutSignal(t *testing.T) {
	// The manager failed on its own: finish still announces first.
	log := &stopLog{}
	s := &shutdown{gossip: fakeGossip{log}, l2: fakeL2{log}, bgp: fakeBGP{log: log}, sleep: func(time.Duration) {}, log: logr.Discard(),
		leaving: leavingPolicy(OnStopRestart, nil)}
	s.finish()
	if want := []string{"gossip: Restarting", "bgp: close sessions without graceful restart", "l2: quiet", "gossip: shutdown"}; !slices.Equal(log.calls, want) {
		t.Errorf("got %q, want %q", log.calls, want)
	}
}

func TestShutdownClosesEverySessionBeforeTheRulesGo(t *testing.T) {
	// On an uninstall after a restart-style finish, the sessions left to
	// graceful restart close first: a router would otherwise keep sending to
	// rules about to disappear.
	log := &stopLog{}
	s := &shutdown{bgp: fakeBGP{log: log}}
	err := s.beforeCleanup(func() error { log.add("rules removed"); return errors.New("boom") })()
	if want := []string{"bgp: close every session", "rules removed"}; !slices.Equal(log.calls, want) {
		t.Errorf("got %q, want %q", log.calls, want)
	}
	if err == nil || err.Error() != "boom" {
		t.Errorf("cleanup error %v, want it returned", err)
	}
}
