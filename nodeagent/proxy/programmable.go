package proxy

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
	"github.com/paas-org/vip-allocator-operator/nodeagent/trust"
)

// programmable keeps in ds (a served Service svc, converted) only the VIPs
// this node may carry, and reports what it refused: each VIP refused, and
// source ranges that do not parse (ds is then Closed: the VIPs stay, to be
// rejected).
func programmable(ds dataplane.Service, svc *corev1.Service, v trust.View) (dataplane.Service, serviceReport) {
	report := serviceReport{svc: svc}
	kept := make([]netip.Addr, 0, len(ds.VIPs))
	for _, vip := range ds.VIPs {
		if r, refused := v.RefusalOf(svc, vip); refused {
			report.refusals = append(report.refusals, r)
			continue
		}
		kept = append(kept, vip)
	}
	ds.VIPs = kept
	if _, invalid := parseSourceRanges(svc.Spec.LoadBalancerSourceRanges); len(invalid) > 0 && len(kept) > 0 {
		report.refusals = append(report.refusals, trust.Refusal{Reason: paasv1.ReasonInvalidSourceRanges,
			Detail: fmt.Sprintf("spec.loadBalancerSourceRanges %s: not a CIDR as Kubernetes reads one (no leading zeros, no zone, no IPv4-mapped IPv6, a /mask); no client reaches %s until it is fixed or removed",
				quoteAll(invalid), ingress.Join(kept))})
	}
	return ds, report
}

func quoteAll(ss []string) string {
	q := make([]string, 0, len(ss))
	for _, s := range ss {
		q = append(q, fmt.Sprintf("%q", clip(s)))
	}
	return strings.Join(q, ", ")
}

// clip shortens what a user wrote to a length a message can carry: a
// condition message holds at most 32 KiB, an annotation or field much more.
func clip(s string) string {
	const most = 64
	if len(s) <= most {
		return s
	}
	return s[:most] + "..."
}
