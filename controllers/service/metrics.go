package service

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	allocationsTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vip_allocator_allocations_total",
		Help: "Addresses allocated (ledger objects created), by IPGroup.",
	}, []string{"ipgroup"})
	allocationFailures = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vip_allocator_allocation_failures_total",
		Help: "Services that could not get an address, by condition reason (counted when the reason or message changes).",
	}, []string{"reason"})
	importConflicts = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vip_allocator_rebuild_import_conflicts_total",
		Help: "Addresses the rebuild at start did not import for a holder because another holder had them already, by source (ledger, virtualip); each is logged.",
	}, []string{"source"})
)

// The sources of importConflicts.
const (
	importSourceLedger    = "ledger"
	importSourceVirtualIP = "virtualip"
)

func init() {
	metrics.Registry.MustRegister(allocationsTotal, allocationFailures, importConflicts)
}
