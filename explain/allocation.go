package explain

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// allocation is step 1 for svc: whether it holds its addresses, and which
// groups admit it, by the allocator's own test (allocator.NotAdmitted).
func (o *Observed) allocation(svc *corev1.Service) Allocation {
	a := Allocation{Service: svc.Namespace + "/" + svc.Name}
	if !lbclass.Handles(svc, o.OwnClassOnly) {
		a.Reason = "not a LoadBalancer Service vip-allocator serves (spec.type, spec.loadBalancerClass)"
		return a
	}
	addrs := ingress.Addrs(svc)
	for _, addr := range addrs {
		a.Addresses = append(a.Addresses, addr.String())
	}
	req, err := k8salloc.Request(svc, o.NamespaceLabels[svc.Namespace])
	if err != nil {
		a.Reason = "the Service's request does not parse: " + err.Error()
		return a
	}
	a.Groups = o.groupVerdicts(req)
	cond := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionIPAllocated)
	switch {
	case len(addrs) == 0 && cond != nil:
		a.Reason = fmt.Sprintf("pending: %s: %s", cond.Reason, cond.Message)
	case len(addrs) == 0:
		a.Reason = "pending: the operator has not written an address or a condition yet; is it running?"
	default:
		a.Check = o.held(svc, addrs)
	}
	return a
}

// held checks that the ledger gives each of addrs to svc.
func (o *Observed) held(svc *corev1.Service, addrs []netip.Addr) Check {
	var parts []string
	for _, addr := range addrs {
		ip := o.ledger(addr)
		if ip == nil || !ledger.HeldBy(ip, svc.UID) {
			return Check{Reason: fmt.Sprintf("%s is in the Service's status, but no IP object gives it to the Service; the agents carry only what the ledger gives", addr)}
		}
		parts = append(parts, fmt.Sprintf("%s from IPGroup %s", addr, ip.Labels[paasv1.IPGroupLabel]))
	}
	return Check{OK: true, Reason: strings.Join(parts, ", ")}
}

// groupVerdicts say for every IPGroup, in the allocator's order (priority,
// then name), whether it admits req's Service, and why not; an admitting
// group with no free address says so.
func (o *Observed) groupVerdicts(req allocator.Request) []GroupVerdict {
	groups := slices.Clone(o.Groups)
	slices.SortFunc(groups, func(x, y paasv1.IPGroup) int {
		if x.Spec.Priority != y.Spec.Priority {
			return int(x.Spec.Priority) - int(y.Spec.Priority)
		}
		return strings.Compare(x.Name, y.Name)
	})
	var out []GroupVerdict
	for i := range groups {
		ipg := &groups[i]
		v := GroupVerdict{Name: ipg.Name}
		g, err := k8salloc.Group(ipg)
		if err != nil {
			v.Reason = "does not parse: " + err.Error()
			out = append(out, v)
			continue
		}
		var why []string
		for _, fam := range req.Families {
			if r := allocator.NotAdmitted(g, fam, req); r != "" {
				why = append(why, r)
				continue
			}
			v.Admitted = true
		}
		switch {
		case !v.Admitted:
			v.Reason = strings.Join(slices.Compact(why), "; ")
		case ipg.Status.Available == "0":
			v.Reason = fmt.Sprintf("admits the Service, but is full (%d of %s in use); add addresses or free one", ipg.Status.Allocated, ipg.Status.Capacity)
		case ipg.Status.Capacity != "":
			v.Reason = fmt.Sprintf("admits the Service (%s of %s free)", ipg.Status.Available, ipg.Status.Capacity)
		default:
			v.Reason = "admits the Service"
		}
		out = append(out, v)
	}
	return out
}
