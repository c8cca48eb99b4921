package gossip

import (
	"bytes"
	"context"
	"encoding/base64"
	"strings"
	"testing"
	"time"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestParseGossipKeys(t *testing.T) {
	k1, k2 := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 16)
	b64 := base64.StdEncoding.EncodeToString
	for _, tc := range []struct {
		desc string
		data map[string][]byte
		want [][]byte
		err  string
	}{
		{"the operator's single raw key", map[string][]byte{paasv1.MemberlistKey: k1}, [][]byte{k1}, ""},
		{"a list wins over the single key, primary first", map[string][]byte{paasv1.MemberlistKey: k1, paasv1.MemberlistKeys: []byte(b64(k2) + "\n" + b64(k1) + "\n")}, [][]byte{k2, k1}, ""},
		{"a key listed twice counts once", map[string][]byte{paasv1.MemberlistKeys: []byte(b64(k1) + " " + b64(k1))}, [][]byte{k1}, ""},
		{"no key at all", map[string][]byte{}, nil, `key "key" holds 0 bytes`},
		{"an empty list", map[string][]byte{paasv1.MemberlistKey: k1, paasv1.MemberlistKeys: []byte("\n")}, nil, "holds no key"},
		{"not base64", map[string][]byte{paasv1.MemberlistKeys: []byte(b64(k1) + "\n%%%")}, nil, "line 2: not base64"},
		{"a key of the wrong size", map[string][]byte{paasv1.MemberlistKeys: []byte(b64(k1) + "\n" + b64([]byte("short")))}, nil, "line 2: 5 bytes"},
	} {
		got, err := parseKeys(tc.data)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("%s: error %v, want %q", tc.desc, err, tc.err)
			}
			continue
		}
		if err != nil || len(got) != len(tc.want) {
			t.Errorf("%s: %d keys, %v; want %d", tc.desc, len(got), err, len(tc.want))
			continue
		}
		for i := range got {
			if !bytes.Equal(got[i], tc.want[i]) {
				t.Errorf("%s: key %d differs", tc.desc, i)
			}
		}
	}
}

// TestJoinRoundsKick: a kick (a member the agent could not place) brings the
// next round at once instead of joinEvery later, and a flood of kicks runs
// at most one round per joinMinGap.
func TestJoinRoundsKick(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kick := make(chan struct{}, 1)
	rounds := make(chan time.Time, 100)
	done := make(chan struct{})
	go func() {
		JoinRounds(ctx, kick, func() { rounds <- time.Now() })
		close(done)
	}()
	<-rounds // the first round runs at once
	kicked := time.Now()
	kick <- struct{}{}
	select {
	case at := <-rounds:
		if wait := at.Sub(kicked); wait > joinEvery/2 {
			t.Fatalf("the kicked round came after %s", wait)
		}
	case <-time.After(joinEvery / 2):
		t.Fatal("a kick brought no round before the period")
	}
	// A flood of kicks for a second.
	flood := time.Now()
	for time.Since(flood) < time.Second {
		select {
		case kick <- struct{}{}:
		default:
		}
		time.Sleep(time.Millisecond)
	}
	cancel()
	<-done
	n := len(rounds)
	if limit := int(time.Second/joinMinGap) + 1; n > limit {
		t.Fatalf("%d rounds in a second of kicks, want at most %d", n, limit)
	}
	if n < 2 {
		t.Fatalf("%d rounds in a second of kicks: kicks were lost", n)
	}
}

// TestLatchedStaysTrue: an agent that settled stays settled when a member
// dies; otherwise the survivors of a kill in the first seconds after start
// would announce nothing until settleAlone passed.
func TestLatchedStaysTrue(t *testing.T) {
	answers := []bool{false, true, false, false}
	calls := 0
	settled := latched(func() bool { calls++; return answers[calls-1] })
	for i, want := range []bool{false, true, true, true} {
		if got := settled(); got != want {
			t.Fatalf("call %d: %v, want %v", i+1, got, want)
		}
	}
	if calls != 2 {
		t.Fatalf("the condition was asked %d times, want 2 (not again once it held)", calls)
	}
}

// The agent that cannot bind its gossip port names the likely holder and both
// fixes, with a port to move to.
func TestGossipPortInUse(t *testing.T) {
	for _, tc := range []struct {
		port int
		want []string
	}{
		{7946, []string{"holds port 7946", "MetalLB's speaker", "METALLB_ML_BIND_PORT", "speaker.memberlist.mlBindPort", "--agent-args=--memberlist-port=7947"}},
		{7950, []string{"holds port 7950", "--agent-args=--memberlist-port=7951"}},
	} {
		got := portInUse(tc.port)
		for _, w := range tc.want {
			if !strings.Contains(got, w) {
				t.Errorf("port %d: %q does not say %q", tc.port, got, w)
			}
		}
	}
}
