// Package testsummary tests hack/test-summary.sh, which ends a failed
// `go test` run's output with the failed packages and tests.
package testsummary

import (
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// summarise feeds the canned go test log to the script and returns what it
// wrote, failing unless it exited 0.
func summarise(t *testing.T, log string) (in, out string) {
	t.Helper()
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("../test-summary.sh")
	cmd.Stdin = strings.NewReader(string(b))
	got, err := cmd.Output()
	if err != nil {
		t.Fatalf("test-summary.sh: %v", err)
	}
	return string(b), string(got)
}

func TestFailedRunEndsWithItsFailures(t *testing.T) {
	in, out := summarise(t, "testdata/failed.log")
	if !strings.HasPrefix(out, in) {
		t.Fatalf("the output does not start with the input, unchanged:\n%s", out)
	}
	want := `
=== slowest packages:
      2s example.com/m/c
      0s example.com/m/a
      0s example.com/m/b
      0s example.com/m/d

=== 4 failed test(s) in 4 failed package(s):
FAIL example.com/m/a 0.241s
    --- FAIL: TestBad (0.00s)
    --- FAIL: TestBad/sub_one (0.00s)
    --- FAIL: TestWorse (0.00s)
FAIL example.com/m/b 0.093s (panicked: assignment to entry in nil map)
    --- FAIL: TestPanic (0.00s)
FAIL example.com/m/c 2.391s (test timed out after 2s, running TestSlow (2s), TestSlow/sub (2s))
FAIL example.com/m/e [build failed]
`
	if summary := strings.TrimPrefix(out, in); summary != want {
		t.Fatalf("summary:\n%s\nwant:\n%s", summary, want)
	}
}

func TestPassedRunEndsWithItsSlowestPackages(t *testing.T) {
	in, out := summarise(t, "testdata/passed.log")
	want := in + `
=== slowest packages:
      0s example.com/m/a
      0s example.com/m/d
`
	if out != want {
		t.Fatalf("output:\n%s\nwant:\n%s", out, want)
	}
}

// TestPipelineKeepsGoTestsExitCode: as the Makefile runs it, the pipeline
// fails when go test does, and passes when it passes.
func TestPipelineKeepsGoTestsExitCode(t *testing.T) {
	for _, tc := range []struct {
		log  string
		code int
	}{{"testdata/failed.log", 1}, {"testdata/passed.log", 0}} {
		goTest := "cat " + tc.log + "; exit " + strconv.Itoa(tc.code)
		err := exec.Command("bash", "-o", "pipefail", "-c", "("+goTest+") 2>&1 | ../test-summary.sh >/dev/null").Run()
		code := 0
		if ee, ok := err.(*exec.ExitError); ok {
			code = ee.ExitCode()
		} else if err != nil {
			t.Fatal(err)
		}
		if code != tc.code {
			t.Errorf("%s: the pipeline exited %d, want %d", tc.log, code, tc.code)
		}
	}
}
