//go:build root

package main

import (
	"os"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/bench/internal/benchtest"
)

func TestMain(m *testing.M) { benchtest.Main(m, main) }

// TestSmoke is 'make bench-bgp-prefixes' at a size 'make test' affords: just over the agent's
// prefix limit, so its speaker must close the session while the bare ones hold every route;
// it fails when that does not happen, when the closed session does not come back after the
// restart delay, or the bench breaks.
func TestSmoke(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("bench-bgp-prefixes builds network namespaces and needs root")
	}
	benchtest.Run(t, 3*time.Minute, []string{"-prefixes", "12000", "-timeout", "1m"}, "ratio accept-all/agent", "ratio accept-all/reject-all", "closed it again")
}
