//go:build root

package main

import (
	"os"
	"strings"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/bench/internal/benchtest"
)

func TestMain(m *testing.M) { benchtest.Main(m, main) }

// TestSmoke is 'make bench-dataplane' at a size 'make test' affords: 20 Services on every plane
// and family, the per-rule baseline for 5; it fails when a plane fails to sync or the bench breaks.
func TestSmoke(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("bench-dataplane builds network namespaces and needs root")
	}
	out := benchtest.Run(t, 2*time.Minute, []string{"-sizes", "20", "-baseline", "5"}, "ratio IPv4", "Healthy()")
	if strings.Contains(out, "(false)") {
		t.Fatal("a plane reported itself unhealthy after its syncs (Healthy() false)")
	}
}
