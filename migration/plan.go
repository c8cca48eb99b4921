package migration

import (
	"fmt"
	"net/netip"
	"slices"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Plan is what the migration of one VirtualIP will do from now on, or what
// blocks it: Decide run forward on a copy of the observed state, each step
// applying the effect its write (or the Service controller, or time) would have.
type Plan struct {
	Steps []string
	// Blocked is the refusal that stops the migration at Steps' end, if any.
	Blocked string
	// Done is true when the VirtualIP is Migrated already.
	Done bool
}

// PlanFor simulates the migration of o.VIP (as if it carried the annotation).
func PlanFor(o Observed) Plan {
	o = deepCopyObserved(o)
	var p Plan
	if o.VIP.Status.State == paasv1.VirtualIPMigrated {
		return Plan{Done: true}
	}
	for range 16 {
		d := Decide(o)
		if d.Refused {
			p.Blocked = d.Message
			return p
		}
		if d.Action == ActionNone && d.Reason == ReasonMigrated {
			return p
		}
		p.Steps = append(p.Steps, describe(o, d))
		addr, _ := netip.ParseAddr(o.VIP.Status.IP)
		switch d.Action {
		case ActionCreateIPGroup:
			o.Groups = append(o.Groups, *d.IPGroup)
		case ActionConvertService:
			o.Service.Spec.Type = corev1.ServiceTypeLoadBalancer
			o.Service.Spec.LoadBalancerIP = addr.String()
		case ActionDeleteClone:
			o.Clone = nil
		case ActionReleaseLoadBalancerIP:
			o.Service.Spec.LoadBalancerIP = ""
		case ActionRemoveFinalizers:
			o.VIP.Finalizers = slices.DeleteFunc(o.VIP.Finalizers, isLegacyFinalizer)
		case ActionMarkMigrated:
			return p
		case ActionNone:
			waitFor(&o, d, addr)
		}
	}
	p.Blocked = "the migration does not converge (a bug): report it with this VirtualIP's YAML"
	return p
}

// waitFor applies what the migration waits for: the Service controller giving
// the Service the IP and taking over its ledger object, or time passing.
func waitFor(o *Observed, d Decision, addr netip.Addr) {
	svc := o.Service
	switch d.Reason {
	case ReasonConvertingService:
		svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: addr.String()}}
		meta.SetStatusCondition(&svc.Status.Conditions, metav1.Condition{Type: paasv1.ConditionIPAllocated,
			Status: metav1.ConditionTrue, Reason: paasv1.ReasonAllocated, LastTransitionTime: metav1.NewTime(o.Now)})
		if o.Ledger == nil {
			o.Ledger = &paasv1.IP{}
		}
		o.Ledger.Spec.Owner = &paasv1.IPOwner{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}
	case ReasonCuttingOver:
		meta.RemoveStatusCondition(&svc.Status.Conditions, paasv1.ConditionAnnounced)
		o.Now = o.Now.Add(d.RequeueAfter + o.CutoverDelay)
	}
}

// describe says in one line what step d will do to o.
func describe(o Observed, d Decision) string {
	svc := o.VIP.Namespace + "/" + o.VIP.Spec.Service
	switch d.Action {
	case ActionCreateIPGroup:
		return fmt.Sprintf("create IPGroup %s (segment %s, %d excluded, autoAssign false)", d.IPGroup.Name, d.IPGroup.Spec.Segment, len(d.IPGroup.Spec.ExcludedIPs))
	case ActionConvertService:
		return fmt.Sprintf("make Service %s type LoadBalancer with spec.loadBalancerIP %s", svc, o.VIP.Status.IP)
	case ActionDeleteClone:
		return fmt.Sprintf("delete the keepalived clone Service %s/%s", o.Clone.Namespace, o.Clone.Name)
	case ActionReleaseLoadBalancerIP:
		return fmt.Sprintf("clear spec.loadBalancerIP of Service %s (it keeps %s)", svc, o.VIP.Status.IP)
	case ActionRemoveFinalizers:
		return "remove the legacy finalizers from the VirtualIP"
	case ActionMarkMigrated:
		return "state Migrated: " + d.Message
	}
	if d.Reason == ReasonCuttingOver {
		return fmt.Sprintf("wait %s: the new data path carries %s while the keepalived clone still answers", o.CutoverDelay, o.VIP.Status.IP)
	}
	return fmt.Sprintf("wait: the operator gives Service %s the IP and relabels the ledger object %s (ipgroup=<group>, owned by the Service)", svc, o.VIP.Status.IP)
}

func deepCopyObserved(o Observed) Observed {
	o.VIP = o.VIP.DeepCopy()
	if o.Service != nil {
		o.Service = o.Service.DeepCopy()
	}
	if o.Ledger != nil {
		o.Ledger = o.Ledger.DeepCopy()
	}
	o.Groups = slices.Clone(o.Groups)
	return o
}
