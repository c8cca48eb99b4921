//go:build envtest

package main

import (
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/bench/internal/benchtest"
)

func TestMain(m *testing.M) { benchtest.Main(m, main) }

// TestSmoke is 'make bench-groups' at a size 'make test' affords (50 groups, 1,000 held
// addresses): every phase runs (the first pass, the baseline, Node annotation changes, group edits).
func TestSmoke(t *testing.T) {
	benchtest.Run(t, 3*time.Minute, []string{"-groups", "50", "-addresses", "1000", "-nodes", "2", "-rounds", "2"},
		"baseline, one reconcile of one group:", "one Node annotation change (an interface on one group's segment):",
		"one IPGroup edit (an excluded address):", "ratio to one reconcile of one group:")
}
