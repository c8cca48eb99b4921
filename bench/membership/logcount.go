package main

import (
	"fmt"
	"os"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/go-logr/logr"
)

// logCounter reads memberlist's log (routed through membership's logr) for
// signs of overload: healthy members declared dead, and suspicions that a
// healthy member had to refute. It formats nothing, so it costs little.
type logCounter struct {
	refutes, errors atomic.Int64
	// phase names what the run is doing ("join", "idle", "kills"), so a
	// false death can be told apart by when it happened.
	phase atomic.Value

	mu          sync.Mutex
	victims     map[string]bool
	falseDeaths map[string]int64 // by phase
}

// counts returns the false deaths by phase, e.g. "join:3 kills:1", or "0".
func (l *logCounter) counts() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var parts []string
	for _, p := range []string{"join", "idle", "kills"} {
		if n := l.falseDeaths[p]; n > 0 {
			parts = append(parts, fmt.Sprintf("%s:%d", p, n))
		}
	}
	if len(parts) == 0 {
		return "0"
	}
	return strings.Join(parts, " ")
}

func (l *logCounter) killed(name string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.victims == nil {
		l.victims = map[string]bool{}
	}
	l.victims[name] = true
}

func (l *logCounter) logger() logr.Logger { return logr.New(counterSink{l}) }

type counterSink struct{ l *logCounter }

func (counterSink) Init(logr.RuntimeInfo) {}

// Enabled: memberlist's warnings arrive at V(1) and its info at V(2).
func (counterSink) Enabled(level int) bool { return level <= 2 }

func (s counterSink) Info(_ int, msg string, _ ...any) {
	switch {
	case strings.HasPrefix(msg, "Refuting a suspect message"):
		s.l.refutes.Add(1)
	case strings.HasPrefix(msg, "Marking ") && strings.Contains(msg, " as failed"):
		// memberlist's node names carry membership's incarnation suffix: name/suffix.
		name, _, _ := strings.Cut(strings.Fields(msg)[1], "/")
		s.l.mu.Lock()
		defer s.l.mu.Unlock()
		if !s.l.victims[name] {
			if s.l.falseDeaths == nil {
				s.l.falseDeaths = map[string]int64{}
			}
			phase, _ := s.l.phase.Load().(string)
			s.l.falseDeaths[phase]++
			if s.l.falseDeaths[phase] <= 3 { // the first few say who
				fmt.Fprintf(os.Stderr, "  false death (%s): %s\n", phase, msg)
			}
		}
	}
}

func (s counterSink) Error(_ error, msg string, _ ...any) {
	if s.l.errors.Add(1) <= 5 { // the first few say what goes wrong
		fmt.Fprintln(os.Stderr, "  memberlist error:", msg)
	}
}
func (s counterSink) WithValues(...any) logr.LogSink { return s }
func (s counterSink) WithName(string) logr.LogSink   { return s }
