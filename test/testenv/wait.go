package testenv

import (
	"strings"
	"testing"
	"time"
)

// Eventually calls f until it returns nil, and fails t with what and f's last
// error when within passes first. It tries again every within/100, between
// 100 ms and 500 ms.
func Eventually(t testing.TB, within time.Duration, what string, f func() error) {
	t.Helper()
	every := min(max(within/100, 100*time.Millisecond), 500*time.Millisecond)
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %s: %v", what, within, err)
		}
		time.Sleep(every)
	}
}

// Must fails t at once with err, if there is one.
func Must(t testing.TB, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}

// Tail is the last n lines of s (a log), without its final newline.
func Tail(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
