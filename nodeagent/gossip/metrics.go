package gossip

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

// gossipKeysInstalled tells, on every agent, which gossip keys it has installed (a
// rotation step is done when every agent shows it).
var gossipKeysInstalled = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "vip_allocator_agent_gossip_keys",
	Help: "Gossip keys installed, by fingerprint (first 8 hex digits of the key's SHA-256) and whether it is the primary (the one messages are encrypted with).",
}, []string{"fingerprint", "primary"})

func init() { metrics.Registry.MustRegister(gossipKeysInstalled) }

// setKeyMetric shows keys (fingerprints, primary first).
func setKeyMetric(keys []string) {
	gossipKeysInstalled.Reset()
	for i, k := range keys {
		gossipKeysInstalled.WithLabelValues(k, fmt.Sprint(i == 0)).Set(1)
	}
}
