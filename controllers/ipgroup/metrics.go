package ipgroup

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var (
	addressesTotal = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vip_allocator_addresses_total",
		Help: "Addresses an IPGroup can hand out (segment minus excluded; IPv6 groups saturate float precision).",
	}, []string{"ipgroup"})
	addressesInUse = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vip_allocator_addresses_in_use",
		Help: "Addresses of an IPGroup held by Services or legacy VirtualIPs.",
	}, []string{"ipgroup"})
	servicesRelocating = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vip_allocator_services_relocating",
		Help: "Services holding an address recorded as the IPGroup's that it no longer allows (IPGroup status.relocating).",
	}, []string{"ipgroup"})
)

func init() {
	metrics.Registry.MustRegister(addressesTotal, addressesInUse, servicesRelocating)
}
