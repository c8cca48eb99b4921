package nodeview

import (
	"testing"
	"time"
)

// An outdated view is left to its node's agent for the grace, counted from
// when the operator first saw it outdated, and forgotten once it is not.
func TestNodeViewLeftToTheAgentForTheGrace(t *testing.T) {
	r := &Reconciler{Grace: 5 * time.Second}
	t0 := time.Date(2026, 11, 27, 10, 0, 0, 0, time.UTC)
	steps := []struct {
		node    string
		at      time.Duration // after t0
		settled bool          // seen up to date instead
		want    time.Duration
	}{
		{node: "a", at: 0, want: 5 * time.Second},
		{node: "a", at: 2 * time.Second, want: 3 * time.Second},
		{node: "b", at: 2 * time.Second, want: 5 * time.Second}, // each node its own
		{node: "a", at: 5 * time.Second, want: 0},
		{node: "a", at: 9 * time.Second, want: 0}, // still outdated: the operator writes
		{node: "a", at: 10 * time.Second, settled: true},
		{node: "a", at: 11 * time.Second, want: 5 * time.Second}, // outdated again: a new grace
	}
	for _, s := range steps {
		if s.settled {
			r.settled(s.node)
			continue
		}
		if got := r.leftToAgent(s.node, t0.Add(s.at)); got != s.want {
			t.Errorf("%s at %s: left to the agent %s, want %s", s.node, s.at, got, s.want)
		}
	}
}
