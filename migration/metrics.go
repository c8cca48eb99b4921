package migration

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	migrationSteps = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vip_allocator_migration_steps_total",
		Help: "Writes made by legacy VirtualIP migrations, by action (MarkMigrated counts finished migrations).",
	}, []string{"action"})
	migrationRefusals = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vip_allocator_migration_refusals_total",
		Help: "Legacy VirtualIP migrations blocked, by reason (counted when a VirtualIP's refusal message changes).",
	}, []string{"reason"})
)

func init() {
	metrics.Registry.MustRegister(migrationSteps, migrationRefusals)
}
