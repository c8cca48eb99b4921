//go:build envtest

package main

import (
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/bench/internal/benchtest"
)

func TestMain(m *testing.M) { benchtest.Main(m, main) }

// TestSmoke is 'make bench-migrate' at a size 'make test' affords: 3 legacy VirtualIPs, a 1 s
// cutover. It fails when a VirtualIP is not Migrated, or its Service changed or shares its IP.
func TestSmoke(t *testing.T) {
	benchtest.Run(t, 3*time.Minute, []string{"-n", "3", "-cutover-delay", "1s"}, "bench-migrate: legacy VirtualIPs migrated at once")
}
