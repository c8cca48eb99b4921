//go:build envtest

package main

import (
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/bench/internal/benchtest"
)

func TestMain(m *testing.M) { benchtest.Main(m, main) }

// TestSmoke is 'make bench-watch' at a size 'make test' affords (50 Nodes
// reporting every 2 s, 100 Services, 6 s): every watcher starts, lists and
// counts what it receives; the upgraded agent reads the old agents' Nodes
// from the watch cache; both kinds of GET are costed.
func TestSmoke(t *testing.T) {
	benchtest.Run(t, 3*time.Minute, []string{"-nodes", "50", "-services", "100", "-duration", "6s", "-report-period", "2s"},
		"ratio agent/kube-proxy (bytes/s):", "agent, as shipped (own Node + NodeViews)", "agent before, Nodes as metadata only",
		"rolling upgrade: 25 of 50 Nodes without a NodeView", "(0 not from the watch cache)", "quorum read (no resourceVersion)")
}
