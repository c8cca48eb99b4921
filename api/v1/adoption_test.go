package v1

import (
	"testing"
	"time"
)

func TestHandOverExpected(t *testing.T) {
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		desc, value string
		want        bool
	}{
		{"not adopted", "", false},
		{"adopted a minute ago", now.Add(-time.Minute).Format(time.RFC3339), true},
		{"adopted just before the window ends", now.Add(-AdoptionHandOver + time.Second).Format(time.RFC3339), true},
		{"the window is over", now.Add(-AdoptionHandOver).Format(time.RFC3339), false},
		{"a time in the future is not trusted", now.Add(time.Hour).Format(time.RFC3339), false},
		{"garbage", "yesterday", false},
	} {
		ip := &IP{}
		if tc.value != "" {
			ip.Annotations = map[string]string{AdoptedAnnotation: tc.value}
		}
		if got := ip.HandOverExpected(now); got != tc.want {
			t.Errorf("%s: HandOverExpected = %v, want %v", tc.desc, got, tc.want)
		}
	}
}
