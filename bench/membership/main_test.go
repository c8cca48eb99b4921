package main

import (
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/bench/internal/benchtest"
)

func TestMain(m *testing.M) { benchtest.Main(m, main) }

// TestSmoke is 'make bench-membership' at a size 'make test' affords: 3 members, our tuned
// timers, one kill per way of dying (memberlist's LAN defaults take 10 s a detection: left to
// the full bench). It fails when a death is not detected or the bench breaks.
func TestSmoke(t *testing.T) {
	benchtest.Run(t, 2*time.Minute, []string{"-sizes", "3", "-timers", "tuned", "-kills", "1", "-idle", "1s"})
}
