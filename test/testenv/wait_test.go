package testenv

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"
)

func TestTail(t *testing.T) {
	for _, tc := range []struct {
		log  string
		n    int
		want string
	}{
		{"a\nb\nc\n", 2, "b\nc"},
		{"a\nb\nc", 2, "b\nc"},
		{"a\nb\n", 5, "a\nb"},
		{"", 3, ""},
	} {
		if got := Tail(tc.log, tc.n); got != tc.want {
			t.Errorf("Tail(%q, %d) = %q, want %q", tc.log, tc.n, got, tc.want)
		}
	}
}

// TestEventually: it returns once f succeeds, having tried again in between.
func TestEventually(t *testing.T) {
	tries := 0
	start := time.Now()
	Eventually(t, time.Second, "the third try", func() error {
		if tries++; tries < 3 {
			return errors.New("not yet")
		}
		return nil
	})
	if tries != 3 {
		t.Errorf("%d tries, want 3", tries)
	}
	if took := time.Since(start); took < 200*time.Millisecond {
		t.Errorf("3 tries in %s: want 100 ms between tries", took)
	}
}

// fatalRecorder is a test that records its Fatalf and ends the goroutine, as
// a test's Fatalf does.
type fatalRecorder struct {
	testing.TB
	fatal string
}

func (r *fatalRecorder) Helper() {}

func (r *fatalRecorder) Fatalf(format string, args ...any) {
	r.fatal = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// TestEventuallyFails: when within passes, it fails the test with what and
// f's last error.
func TestEventuallyFails(t *testing.T) {
	r := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		Eventually(r, 300*time.Millisecond, "the impossible", func() error { return errors.New("never") })
	}()
	<-done
	if want := "the impossible: not within 300ms: never"; r.fatal != want {
		t.Errorf("failed with %q, want %q", r.fatal, want)
	}
}
