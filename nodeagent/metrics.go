package nodeagent

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// registerCounterFunc exports a count kept elsewhere (a package below this
// one, made at start) as a counter; a second agent in one process (tests)
// keeps the first one's.
func registerCounterFunc(name, help string, count func() uint64) {
	_ = metrics.Registry.Register(prometheus.NewCounterFunc(prometheus.CounterOpts{Name: name, Help: help},
		func() float64 { return float64(count()) }))
}
