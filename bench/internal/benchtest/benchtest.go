// Package benchtest runs a benchmark command from its own package's tests, at a smoke size,
// exactly as 'make bench-*' runs it at full size: so a benchmark that breaks fails 'make test'
// instead of rotting until someone next measures.
//
// The test binary stands in for the command: Run re-runs it with the command's flags and
// VIPA_BENCH_MAIN set, and Main (the package's TestMain) then runs the command's main instead
// of the tests. Benchmarks that re-run os.Args[0] for child processes get the same treatment,
// since their children inherit the variable.
package benchtest

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

const mainEnv = "VIPA_BENCH_MAIN"

// Main is a benchmark package's TestMain: the command's main when Run (or the command
// itself, for a child) re-ran the binary, the package's tests otherwise.
func Main(m *testing.M, main func()) {
	if os.Getenv(mainEnv) != "" {
		main()
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// Run runs the command with args and returns its output (stdout and stderr). The test fails
// when the command exits non-zero, runs past timeout, or its output lacks one of want.
func Run(t *testing.T, timeout time.Duration, args []string, want ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	c := exec.CommandContext(ctx, os.Args[0], args...)
	c.Env = append(os.Environ(), mainEnv+"=1")
	// The command's own children (the control plane, the operator) must not outlive a
	// timeout: they run in its process group, which the kill takes down with it.
	c.SysProcAttr = processGroup()
	c.Cancel = func() error { return killGroup(c) }
	c.WaitDelay = 10 * time.Second
	var out bytes.Buffer
	c.Stdout, c.Stderr = &out, &out
	start := time.Now()
	err := c.Run()
	took := time.Since(start).Round(time.Millisecond)
	if errors.Is(ctx.Err(), context.DeadlineExceeded) {
		t.Fatalf("%s %s: still running after %s; output:\n%s", t.Name(), strings.Join(args, " "), timeout, out.String())
	}
	if err != nil {
		t.Fatalf("%s: %v after %s; output:\n%s", strings.Join(args, " "), err, took, out.String())
	}
	for _, w := range want {
		if !strings.Contains(out.String(), w) {
			t.Fatalf("%s: the output lacks %q; output:\n%s", strings.Join(args, " "), w, out.String())
		}
	}
	t.Logf("%s (%s):\n%s", strings.Join(args, " "), took, out.String())
	return out.String()
}
