// Package eventlimit keeps the operator's informational Events from taking
// the API server from its work. Every allocation, release and move is an
// Event, and each Event is one more write: when thousands of Services wait
// at once (a first install, a restore) they are the API server's third write
// per Service, and what a Service holds is in its status and conditions
// anyway. So the Normal Events share one token bucket: the steady trickle of
// a running cluster passes whole, a burst passes its first Events and then a
// few a second, and what is skipped is counted. Warnings always pass: they
// are what someone must read.
package eventlimit

import (
	"github.com/prometheus/client_golang/prometheus"
	"golang.org/x/time/rate"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// The Normal Events the operator writes: PerSecond on average, Burst at once.
const (
	PerSecond = 5
	Burst     = 100
)

var skipped = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "vip_allocator_events_skipped_total",
	Help: "Normal Events not written because more came at once than the operator writes (a burst of allocations): what they said is in the objects' status. By reason.",
}, []string{"reason"})

func init() { metrics.Registry.MustRegister(skipped) }

// NewLimiter is the bucket every Recorder of one operator shares.
func NewLimiter() *rate.Limiter { return rate.NewLimiter(PerSecond, Burst) }

// Recorder is an EventRecorder whose Normal Events pass only as Normal allows.
type Recorder struct {
	record.EventRecorder
	Normal *rate.Limiter
}

// passes reports whether an Event of this type and reason is written.
func (r Recorder) passes(eventtype, reason string) bool {
	if eventtype != corev1.EventTypeNormal || r.Normal.Allow() {
		return true
	}
	skipped.WithLabelValues(reason).Inc()
	return false
}

func (r Recorder) Event(object runtime.Object, eventtype, reason, message string) {
	if r.passes(eventtype, reason) {
		r.EventRecorder.Event(object, eventtype, reason, message)
	}
}

func (r Recorder) Eventf(object runtime.Object, eventtype, reason, messageFmt string, args ...any) {
	if r.passes(eventtype, reason) {
		r.EventRecorder.Eventf(object, eventtype, reason, messageFmt, args...)
	}
}

func (r Recorder) AnnotatedEventf(object runtime.Object, annotations map[string]string, eventtype, reason, messageFmt string, args ...any) {
	if r.passes(eventtype, reason) {
		r.EventRecorder.AnnotatedEventf(object, annotations, eventtype, reason, messageFmt, args...)
	}
}
