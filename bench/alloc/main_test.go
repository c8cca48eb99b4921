//go:build envtest

package main

import (
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/bench/internal/benchtest"
)

func TestMain(m *testing.M) { benchtest.Main(m, main) }

// TestSmoke is 'make bench-alloc' at a size 'make test' affords (20 Services): every phase runs
// (baseline, allocation, restart, relocation, a second round, the sharing case with 6 triples), and it fails when
// an IP changed or is held twice, or a shared one by two sharing keys. It samples where the
// operator's workers wait too (-waits), so that diagnosis cannot rot either.
func TestSmoke(t *testing.T) {
	benchtest.Run(t, 3*time.Minute, []string{"-n", "20", "-waits", "-rounds", "2"}, "ratio, the median of 2 rounds", "the API server's requests and watch events per Service, baseline:",
		"IPs held by two Services after the relocation:", "shared IPs held by two sharing keys:")
}
