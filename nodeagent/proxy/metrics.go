package proxy

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
		Help: "Rules written by the last sync, by family (the nftables plane writes rules only on a full sync or for a new endpoint count).",
	}, []string{"family"})
	elementsWritten = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vip_allocator_agent_elements",
		Help: "nftables set and map elements added or deleted by the last sync, by family (0 on the iptables plane).",
	}, []string{"family"})
	// Named after iptables-restore, and kept so dashboards hold: it counts the
	// nftables plane's failed transactions too.
	syncFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vip_allocator_agent_restore_failures_total",
		Help: "Syncs whose write failed (iptables-restore or nftables transaction), by family.",
	}, []string{"family"})
	refusedAddresses = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vip_allocator_agent_refused_addresses",
		Help: "Addresses in Service statuses this node refuses to program and announce, by reason (NodeAddress, LocalAddress, NotInLedger), and Services it closes (InvalidSourceRanges).",
	}, []string{"reason"})
)

func init() {
	metrics.Registry.MustRegister(syncDuration, rulesWritten, elementsWritten, syncFailures, refusedAddresses)
}
