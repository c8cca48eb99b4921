package nodeagent

import (
	"fmt"

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

// gossipKeys tells, on every agent, which gossip keys it has installed (a
// rotation step is done when every agent shows it).
var gossipKeysInstalled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "vip_allocator_agent_gossip_keys",
	Help: "Gossip keys installed, by fingerprint (first 8 hex digits of the key's SHA-256) and whether it is the primary (the one messages are encrypted with).",
}, []string{"fingerprint", "primary"})

func init() { metrics.Registry.MustRegister(gossipKeysInstalled) }

// setGossipKeyMetric shows keys (fingerprints, primary first).
func setGossipKeyMetric(keys []string) {
	gossipKeysInstalled.Reset()
	for i, k := range keys {
		gossipKeysInstalled.WithLabelValues(k, fmt.Sprint(i == 0)).Set(1)
	}
}
