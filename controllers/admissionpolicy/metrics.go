package admissionpolicy

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"
)

var inForce = prometheus.NewGaugeVec(prometheus.GaugeOpts{
	Name: "vip_allocator_admission_policy_in_force",
	Help: "1 when a ValidatingAdmissionPolicy or binding of config/admission is in the cluster as shipped, 0 when missing or altered (OLM installs: --admission-policies).",
}, []string{"kind", "name"})

func init() { metrics.Registry.MustRegister(inForce) }
