package eventlimit

import (
	"testing"

	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// TestBurstPassesItsHeadAndEveryWarning: of a burst of Normal Events the
// bucket's worth passes, the rest is skipped; every Warning passes, also
// once the bucket is empty.
func TestBurstPassesItsHeadAndEveryWarning(t *testing.T) {
	fake := record.NewFakeRecorder(1000)
	r := Recorder{EventRecorder: fake, Normal: rate.NewLimiter(rate.Every(1<<62), 3)} // no refill during the test
	svc := &corev1.Service{}
	for i := range 10 {
		r.Eventf(svc, corev1.EventTypeNormal, "IPAllocated", "Allocated %d", i)
	}
	r.Event(svc, corev1.EventTypeWarning, "AllocationFailed", "no address")
	r.AnnotatedEventf(svc, nil, corev1.EventTypeWarning, "AddressConflict", "conflict")
	r.AnnotatedEventf(svc, nil, corev1.EventTypeNormal, "IPReleased", "released")
	close(fake.Events)
	var got []string
	for e := range fake.Events {
		got = append(got, e)
	}
	want := []string{"Normal IPAllocated Allocated 0", "Normal IPAllocated Allocated 1", "Normal IPAllocated Allocated 2",
		"Warning AllocationFailed no address", "Warning AddressConflict conflict"}
	if len(got) != len(want) {
		t.Fatalf("written %q, want %q", got, want)
	}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("written %q, want %q", got, want)
		}
	}
}
