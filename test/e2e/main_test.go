//go:build root && envtest

package e2e

import (
	"os"
	"testing"
	"time"
)

// TestMain runs the bare speaker or the gossip impostor when a test re-runs
// this binary as one.
func TestMain(m *testing.M) {
	if os.Getenv("VIPA_BARE_SPEAKER") != "" {
		runBareSpeaker()
		return
	}
	if os.Getenv(impostorEnv) != "" {
		runImpostor()
		return
	}
	os.Exit(m.Run())
}

// settle is how long the lab's checks wait for what they expect
// (testenv.Eventually).
const settle = 20 * time.Second
