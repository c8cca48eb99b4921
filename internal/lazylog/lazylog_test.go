package lazylog

import (
	"bytes"
	"errors"
	"testing"

	"github.com/go-logr/logr"
	"github.com/go-logr/zapr"
	"go.uber.org/zap"
	"go.uber.org/zap/zapcore"
)

// A logger wrapped writes exactly the lines the logger itself writes, the
// caller's file and line included.
func TestWrappedWritesTheSameLines(t *testing.T) {
	cases := map[string]func(l logr.Logger){
		"plain line": func(l logr.Logger) { l.Info("hello", "k", 1) },
		"values, then a line": func(l logr.Logger) {
			l.WithValues("controller", "service", "reconcileID", "abc").Info("allocated", "ip", "192.0.2.1")
		},
		"values added twice": func(l logr.Logger) {
			l.WithValues("a", 1).WithValues("b", 2).Info("two")
		},
		"names and values mixed": func(l logr.Logger) {
			l.WithName("operator").WithValues("a", 1).WithName("service").WithValues("b", 2).Info("named")
		},
		"an error": func(l logr.Logger) {
			l.WithValues("req", "ns/name").Error(errors.New("conflict"), "write failed", "try", 2)
		},
		"a level not enabled writes nothing": func(l logr.Logger) {
			l.WithValues("a", 1).V(5).Info("quiet")
		},
		"a level enabled": func(l logr.Logger) { l.WithValues("a", 1).V(1).Info("verbose") },
		"siblings do not share values": func(l logr.Logger) {
			// Three pairs: room left in the values' array for one more.
			base := l.WithValues("a", 1).WithValues("b", 2).WithValues("c", 3)
			x, y := base.WithValues("x", 1), base.WithValues("y", 2)
			x.Info("x")
			y.Info("y")
		},
		"a caller's slice changed afterwards": func(l logr.Logger) {
			kv := []any{"a", 1}
			withA := l.WithValues(kv...)
			kv[1] = 2
			withA.Info("still 1")
		},
		"a helper's call depth": func(l logr.Logger) { helper(l.WithValues("a", 1)) },
	}
	for name, log := range cases {
		t.Run(name, func(t *testing.T) {
			eager, eagerOut := testLogger()
			lazy, lazyOut := testLogger()
			log(eager)
			log(Wrap(lazy))
			if eagerOut.String() != lazyOut.String() {
				t.Errorf("wrapped wrote\n%s\nthe logger itself\n%s", lazyOut, eagerOut)
			}
		})
	}
}

func helper(l logr.Logger) { l.WithCallDepth(1).Info("from the helper's caller") }

// The point of the package: adding values encodes nothing.
func TestWithValuesAllocatesNoEncoder(t *testing.T) {
	l, _ := testLogger()
	lazy := Wrap(l)
	eager := testing.AllocsPerRun(100, func() { _ = l.WithValues("controller", "service", "reconcileID", "abc") })
	deferred := testing.AllocsPerRun(100, func() { _ = lazy.WithValues("controller", "service", "reconcileID", "abc") })
	if deferred >= eager {
		t.Errorf("WithValues allocates %.0f times wrapped, %.0f times not", deferred, eager)
	}
}

// testLogger writes JSON lines with the caller and no time, V(1) enabled.
func testLogger() (logr.Logger, *bytes.Buffer) {
	var out bytes.Buffer
	cfg := zap.NewProductionEncoderConfig()
	cfg.TimeKey = ""
	core := zapcore.NewCore(zapcore.NewJSONEncoder(cfg), zapcore.AddSync(&out), zapcore.Level(-1))
	return zapr.NewLogger(zap.New(core, zap.AddCaller())), &out
}
