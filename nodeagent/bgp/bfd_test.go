package bgp

import (
	"maps"
	"strings"
	"testing"
	"time"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// TestBFDTracker walks one tracker through a session's life: each step's
// states are what the sessions report, want the changes reported.
func TestBFDTracker(t *testing.T) {
	const a, b = "198.51.100.1", "2001:db8::1"
	var tr bfdTracker
	start := time.Now()
	steps := []struct {
		desc string
		now  map[string]bfdSession
		want map[string]string
	}{
		{"no session", map[string]bfdSession{}, map[string]string{}},
		{"a new session starts Down: no change", map[string]bfdSession{a: {state: paasv1.BFDDown}}, map[string]string{}},
		{"it comes up through Init", map[string]bfdSession{a: {state: paasv1.BFDInit, received: 1}}, map[string]string{a: paasv1.BFDInit}},
		{"up", map[string]bfdSession{a: {state: paasv1.BFDUp, received: 2}}, map[string]string{a: paasv1.BFDUp}},
		{"still up, more packets: no change", map[string]bfdSession{a: {state: paasv1.BFDUp, received: 9}}, map[string]string{}},
		{"a second session already up when first seen", map[string]bfdSession{a: {state: paasv1.BFDUp}, b: {state: paasv1.BFDUp}}, map[string]string{b: paasv1.BFDUp}},
		{"the path fails", map[string]bfdSession{a: {state: paasv1.BFDDown, received: 9}, b: {state: paasv1.BFDUp}}, map[string]string{a: paasv1.BFDDown}},
		{"a peer removed is forgotten", map[string]bfdSession{a: {state: paasv1.BFDDown}}, map[string]string{}},
		{"and is new again when it comes back", map[string]bfdSession{a: {state: paasv1.BFDDown}, b: {state: paasv1.BFDDown}}, map[string]string{}},
	}
	for i, st := range steps {
		if got := tr.observe(st.now, start.Add(time.Duration(i)*time.Second)); !maps.Equal(got, st.want) {
			t.Errorf("%s: changes %v, want %v", st.desc, got, st.want)
		}
	}
	// The last packet's time: kept while the count stands still.
	tr.observe(map[string]bfdSession{a: {state: paasv1.BFDUp, received: 5}}, start)
	tr.observe(map[string]bfdSession{a: {state: paasv1.BFDUp, received: 5}}, start.Add(time.Minute))
	if s, _ := tr.session(a); !s.lastRx.Equal(start) {
		t.Errorf("last packet at %v, want %v: the count did not grow", s.lastRx, start)
	}
	tr.observe(map[string]bfdSession{a: {state: paasv1.BFDUp, received: 6}}, start.Add(2*time.Minute))
	if s, _ := tr.session(a); !s.lastRx.Equal(start.Add(2 * time.Minute)) {
		t.Errorf("last packet at %v, want when the count grew", s.lastRx)
	}
}

func TestBFDMessage(t *testing.T) {
	now := time.Now()
	tests := []struct {
		desc        string
		s           bfdSession
		known       bool
		established bool
		lastDown    string
		want        string // a part of the message; "" for none
	}{
		{"up: nothing to say", bfdSession{state: paasv1.BFDUp, received: 5, lastRx: now}, true, true, "", ""},
		{"a router that stopped sending (its BFD removed) no longer runs BFD", bfdSession{state: paasv1.BFDDown, received: 40, lastRx: now.Add(-time.Minute)}, true, true,
			bfdSignalled, "does not run BFD for this node"},
		{"a router that never answers does not run BFD", bfdSession{state: paasv1.BFDDown}, true, true, "", "does not run BFD for this node"},
		{"no session yet, BGP session up: same", bfdSession{}, false, true, "", "does not run BFD for this node"},
		{"session not up yet: nothing heard yet", bfdSession{state: paasv1.BFDDown}, true, false, "", "no BFD packets from the router yet"},
		{"went down: the reason", bfdSession{state: paasv1.BFDDown, received: 40, lastRx: now}, true, false, bfdExpired, "no packet from the router within the detection time"},
		{"went down, session back up, packets again: the reason", bfdSession{state: paasv1.BFDDown, received: 40, lastRx: now}, true, true, bfdExpired, "detection time"},
		{"coming up", bfdSession{state: paasv1.BFDInit, received: 1, lastRx: now}, true, true, "", "BFD is Init"},
	}
	for _, tt := range tests {
		got := bfdMessage(tt.s, tt.known, tt.established, tt.lastDown, "198.51.100.1", now)
		if (tt.want == "") != (got == "") || !strings.Contains(got, tt.want) {
			t.Errorf("%s: %q, want %q", tt.desc, got, tt.want)
		}
	}
}
