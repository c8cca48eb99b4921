// Package lazylog defers a logger's WithValues until a line is written.
//
// controller-runtime gives every reconcile a logger with the request and a
// reconcile ID added by WithValues, and zap encodes those values at once, into
// a buffer of a cloned encoder: a tenth of what the operator would allocate per
// allocation (make bench-alloc), for lines that are almost never written. A
// logger wrapped here keeps the values aside and hands them to zap only for a
// line that is written, with the same result — but for a value that changes
// after it was added, which a written line shows as it is then.
package lazylog

import (
	"slices"

	"github.com/go-logr/logr"
)

// Wrap returns l with its WithValues deferred to the lines written.
func Wrap(l logr.Logger) logr.Logger {
	base := l.GetSink()
	if base == nil {
		return l
	}
	// One frame more between the caller and base: ours.
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		base = cd.WithCallDepth(1)
	}
	return logr.New(&sink{base: base}).V(l.GetV())
}

// sink is base with the key/value pairs added since it was wrapped.
type sink struct {
	base logr.LogSink
	kv   []any
}

// Init does nothing: base was initialised with its logger.
func (s *sink) Init(logr.RuntimeInfo) {}

func (s *sink) Enabled(level int) bool { return s.base.Enabled(level) }

func (s *sink) Info(level int, msg string, kv ...any) {
	s.materialized().Info(level, msg, kv...)
}

func (s *sink) Error(err error, msg string, kv ...any) {
	s.materialized().Error(err, msg, kv...)
}

// WithValues copies the pairs (a logger's values are its own, whatever the
// caller does to its slice later) and adds them to the ones kept.
func (s *sink) WithValues(kv ...any) logr.LogSink {
	return &sink{base: s.base, kv: append(slices.Clip(s.kv), kv...)}
}

// WithName is not deferred: names are few and cheap, and zap keeps them apart
// from the values, so their order does not change a line.
func (s *sink) WithName(name string) logr.LogSink {
	return &sink{base: s.base.WithName(name), kv: s.kv}
}

func (s *sink) WithCallDepth(depth int) logr.LogSink {
	base := s.base
	if cd, ok := base.(logr.CallDepthLogSink); ok {
		base = cd.WithCallDepth(depth)
	}
	return &sink{base: base, kv: s.kv}
}

// materialized is base with the values kept, for one line.
func (s *sink) materialized() logr.LogSink {
	if len(s.kv) == 0 {
		return s.base
	}
	return s.base.WithValues(s.kv...)
}
