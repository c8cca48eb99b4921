package nodeagent

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	syncDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vip_allocator_agent_sync_duration_seconds",
		Help:    "Time to write the node's rules, by family and mode (full or partial).",
		Buckets: prometheus.ExponentialBuckets(0.001, 2, 14),
	}, []string{"family", "mode"})
	rulesWritten = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vip_allocator_agent_rules",
		Help: "Rules written by the last sync, by family.",
	}, []string{"family"})
	restoreFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vip_allocator_agent_restore_failures_total",
		Help: "iptables-restore runs that failed, by family.",
	}, []string{"family"})
)

func init() {
	metrics.Registry.MustRegister(syncDuration, rulesWritten, restoreFailures)
}
