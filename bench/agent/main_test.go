//go:build root && envtest

package main

import (
	"os"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/bench/internal/benchtest"
)

func TestMain(m *testing.M) { benchtest.Main(m, main) }

// TestSmoke is 'make bench-agent' at a size 'make test' affords: 20 Services, 10 timed changes,
// 3 s of load at 20 changes/s; it fails when either agent does not get every change into its
// kernel, or the bench breaks.
func TestSmoke(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("bench-agent builds network namespaces and needs root")
	}
	benchtest.Run(t, 4*time.Minute, []string{"-n", "20", "-changes", "10", "-gap", "200ms", "-rate", "20", "-load", "3s"},
		"ratio ours/kube-proxy", "one endpoint change -> kernel, p99", "target (ours at or below kube-proxy on each figure)")
}
