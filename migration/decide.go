package migration

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
)

// Action is the one write a reconcile makes.
type Action string

// The actions, in the order a migration makes them.
const (
	ActionNone                  Action = ""
	ActionCreateIPGroup         Action = "CreateIPGroup"
	ActionConvertService        Action = "ConvertService"
	ActionDeleteClone           Action = "DeleteClone"
	ActionReleaseLoadBalancerIP Action = "ReleaseLoadBalancerIP"
	ActionRemoveFinalizers      Action = "RemoveFinalizers"
	ActionMarkMigrated          Action = "MarkMigrated"
)

// Actions lists every action in order (tests stop the operator after each).
var Actions = []Action{ActionCreateIPGroup, ActionConvertService, ActionDeleteClone,
	ActionReleaseLoadBalancerIP, ActionRemoveFinalizers, ActionMarkMigrated}

// Reasons of the VirtualIP condition Migrated. Refusals first: each comes with
// a message that names the fix, and the migration resumes once it is made.
// The cutover (the clone waits out CutoverDelay) keeps its published reason
// HandingOver and state "Migrating: handing over": the code calls it cutover
// so it cannot be confused with the data plane's connection hand-off.
const (
	ReasonNotValid          = "NotValid"
	ReasonNoIP              = "NoIP"
	ReasonServiceNotFound   = "ServiceNotFound"
	ReasonServiceConflict   = "ServiceConflict"
	ReasonIPInUse           = "IPInUse"
	ReasonIPExcluded        = "IPExcluded"
	ReasonGroupNotAllowed   = "GroupNotAllowed"
	ReasonNoIPGroup         = "NoIPGroup"
	ReasonIPGroupConflict   = "IPGroupConflict"
	ReasonPreparingIPGroup  = "PreparingIPGroup"
	ReasonConvertingService = "ConvertingService"
	ReasonCuttingOver       = "HandingOver"
	ReasonCleaningUp        = "CleaningUp"
	ReasonMigrated          = "Migrated"
)

// The intermediate states, as the original operator spelled them (see above
// for StateCuttingOver).
const (
	StatePreparingIPGroup  = paasv1.VirtualIPMigratingPrefix + "preparing IPGroup"
	StateConvertingService = paasv1.VirtualIPMigratingPrefix + "converting Service"
	StateCuttingOver       = paasv1.VirtualIPMigratingPrefix + "handing over"
	StateCleaningUp        = paasv1.VirtualIPMigratingPrefix + "cleaning up"
)

// Observed is what one decision needs, as read from the cluster.
type Observed struct {
	VIP *paasv1.VirtualIP
	// Service is the target (spec.service); nil when it does not exist.
	Service *corev1.Service
	// NamespaceLabels are the labels of the VirtualIP's namespace (IPGroup selectors).
	NamespaceLabels map[string]string
	// Clone is the keepalived clone Service the VirtualIP owns; nil once gone.
	Clone *corev1.Service
	// Ledger is the IP object of the address; nil when there is none.
	Ledger *paasv1.IP
	Groups []paasv1.IPGroup
	// GSM is the VirtualIP's GroupSegmentMapping (status.gsm); nil when missing.
	GSM *paasv1.GroupSegmentMapping
	// OwnClassOnly mirrors the operator's flag: converted Services get our class.
	OwnClassOnly bool
	// CutoverDelay is how long the Service must have held the IP (so every
	// agent programs and announces it) before the keepalived path is removed.
	CutoverDelay time.Duration
	Now          time.Time
}

// Decision is the next step: one action (or none while waiting, blocked or
// done) and the status that reports it.
type Decision struct {
	Action  Action
	Refused bool
	State   string
	Reason  string
	Message string
	// IPGroup is the group the IP lives in (to create with ActionCreateIPGroup).
	IPGroup *paasv1.IPGroup
	// RequeueAfter is set while waiting on time rather than on an event.
	RequeueAfter time.Duration
}

// Accepted reports whether the migration of vip has started from a Valid
// VirtualIP: later refusals set state Error, and must not read as "not Valid".
func Accepted(vip *paasv1.VirtualIP) bool {
	if strings.HasPrefix(vip.Status.State, paasv1.VirtualIPMigratingPrefix) || vip.Status.State == paasv1.VirtualIPMigrated {
		return true
	}
	c := meta.FindStatusCondition(vip.Status.Conditions, paasv1.VirtualIPConditionMigrated)
	return c != nil && c.Reason != ReasonNotValid
}

func refuse(reason, format string, args ...any) Decision {
	return Decision{Refused: true, State: paasv1.VirtualIPError, Reason: reason, Message: fmt.Sprintf(format, args...)}
}

// Decide computes the next step of o.VIP's migration: the refusals first, then
// the IPGroup, then the first phase that still has something to do.
func Decide(o Observed) Decision {
	if o.VIP.Status.State == paasv1.VirtualIPMigrated {
		return Decision{State: paasv1.VirtualIPMigrated, Reason: ReasonMigrated, Message: o.VIP.Status.Message}
	}
	addr, d, blocked := refusal(o)
	if blocked {
		return d
	}
	group, create, d, blocked := coveringGroup(o, addr)
	if blocked {
		return d
	}
	if create {
		return Decision{Action: ActionCreateIPGroup, State: StatePreparingIPGroup, Reason: ReasonPreparingIPGroup, IPGroup: group,
			Message: fmt.Sprintf("creating IPGroup %s from GroupSegmentMapping %s (segment %s) to hold %s", group.Name, o.GSM.Name, group.Spec.Segment, addr)}
	}
	for _, phase := range []func(Observed, netip.Addr, string) (Decision, bool){convertingService, cuttingOver, cleaningUp} {
		if d, busy := phase(o, addr, group.Name); busy {
			return d
		}
	}
	return Decision{Action: ActionMarkMigrated, State: paasv1.VirtualIPMigrated, Reason: ReasonMigrated,
		Message: fmt.Sprintf("migrated: Service %s is a LoadBalancer holding %s from IPGroup %s; this VirtualIP can be deleted", targetName(o.VIP), addr, group.Name)}
}

// refusal checks what must hold before anything is written, and returns the
// VirtualIP's address when nothing blocks.
func refusal(o Observed) (netip.Addr, Decision, bool) {
	vip, svc := o.VIP, o.Service
	name := vip.Namespace + "/" + vip.Name
	if !Accepted(vip) && vip.Status.State != paasv1.VirtualIPValid {
		return netip.Addr{}, refuse(ReasonNotValid, "VirtualIP %s is in state %q, not Valid, so it holds no working IP to carry over; "+
			"create Service %s as type LoadBalancer directly and delete this VirtualIP, or repair it to Valid", name, vip.Status.State, targetName(vip)), true
	}
	addr, err := netip.ParseAddr(vip.Status.IP)
	if err != nil {
		return netip.Addr{}, refuse(ReasonNoIP, "VirtualIP %s has no IP in status.ip (%q); it holds nothing to carry over: create Service %s as type LoadBalancer directly",
			name, vip.Status.IP, targetName(vip)), true
	}
	addr = addr.Unmap()
	if svc == nil || svc.DeletionTimestamp != nil {
		return addr, refuse(ReasonServiceNotFound, "Service %s (spec.service) does not exist; create it and the migration resumes (it gets %s)", targetName(vip), addr), true
	}
	if d, blocked := serviceConflict(o, addr); blocked {
		return addr, d, true
	}
	if l := o.Ledger; l != nil && l.Spec.Owner != nil && (l.Spec.Owner.Namespace != svc.Namespace || l.Spec.Owner.Name != svc.Name || l.Spec.Owner.UID != svc.UID) {
		return addr, refuse(ReasonIPInUse, "the ledger says %s is held by Service %s/%s, not by this VirtualIP; free it there (or migrate to that Service) and the migration resumes",
			addr, l.Spec.Owner.Namespace, l.Spec.Owner.Name), true
	}
	return addr, Decision{}, false
}

// convertingService: the Service becomes a LoadBalancer asking for the IP, then
// waits until the Service controller has given it the IP and taken over its ledger object.
func convertingService(o Observed, addr netip.Addr, group string) (Decision, bool) {
	svc := o.Service
	d := Decision{State: StateConvertingService, Reason: ReasonConvertingService,
		Message: fmt.Sprintf("converting Service %s to type LoadBalancer with %s from IPGroup %s", targetName(o.VIP), addr, group)}
	holds := slices.Contains(k8salloc.IngressAddrs(svc), addr)
	if svc.Spec.Type != corev1.ServiceTypeLoadBalancer || (!holds && svc.Spec.LoadBalancerIP != addr.String() && !annotatedWith(svc, addr)) {
		d.Action = ActionConvertService
		return d, true
	}
	takenOver := o.Ledger != nil && o.Ledger.Spec.Owner != nil
	if holds && takenOver {
		return Decision{}, false
	}
	if c := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionIPAllocated); c != nil && c.Status == metav1.ConditionFalse {
		d.Message += fmt.Sprintf("; waiting: the Service reports %s: %s", c.Reason, c.Message)
	}
	return d, true
}

// cuttingOver: the keepalived clone stays until the new path has carried the
// IP for the cutover delay (and is announced, when the Service says so).
func cuttingOver(o Observed, addr netip.Addr, _ string) (Decision, bool) {
	if o.Clone == nil {
		return Decision{}, false
	}
	d := Decision{State: StateCuttingOver, Reason: ReasonCuttingOver,
		Message: fmt.Sprintf("Service %s holds %s; the keepalived clone %s/%s goes once the new data path has carried the IP for %s",
			targetName(o.VIP), addr, o.Clone.Namespace, o.Clone.Name, o.CutoverDelay)}
	if c := meta.FindStatusCondition(o.Service.Status.Conditions, paasv1.ConditionAnnounced); c != nil && c.Status != metav1.ConditionTrue {
		d.Message += fmt.Sprintf("; waiting for the announcement: %s", c.Message)
		return d, true
	}
	if wait := cutoverLeft(o.Service, o.CutoverDelay, o.Now); wait > 0 {
		d.RequeueAfter = wait
		return d, true
	}
	d.Action = ActionDeleteClone
	return d, true
}

// cleaningUp: spec.loadBalancerIP goes (unless the VirtualIP asked for its IP),
// then the legacy finalizers.
func cleaningUp(o Observed, addr netip.Addr, _ string) (Decision, bool) {
	d := Decision{State: StateCleaningUp, Reason: ReasonCleaningUp,
		Message: fmt.Sprintf("Service %s holds %s; removing spec.loadBalancerIP (unless the VirtualIP asked for the IP) and the legacy finalizers", targetName(o.VIP), addr)}
	switch {
	case o.VIP.Spec.IP == "" && o.Service.Spec.LoadBalancerIP != "":
		d.Action = ActionReleaseLoadBalancerIP
	case hasLegacyFinalizers(o.VIP):
		d.Action = ActionRemoveFinalizers
	default:
		return Decision{}, false
	}
	return d, true
}

// targetName is "<namespace>/<spec.service>".
func targetName(vip *paasv1.VirtualIP) string { return vip.Namespace + "/" + vip.Spec.Service }

// serviceConflict refuses a target Service that cannot take the IP as it is.
func serviceConflict(o Observed, addr netip.Addr) (Decision, bool) {
	svc := o.Service
	name := svc.Namespace + "/" + svc.Name
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return refuse(ReasonServiceConflict, "Service %s is of type ExternalName, which cannot hold an IP; make it a ClusterIP Service with a selector", name), true
	}
	for _, held := range k8salloc.IngressAddrs(svc) {
		if held != addr {
			return refuse(ReasonServiceConflict, "Service %s is already a LoadBalancer with %s, not %s; remove that address (or point spec.service at another Service) and the migration resumes", name, held, addr), true
		}
	}
	if ip := svc.Spec.LoadBalancerIP; ip != "" && ip != addr.String() {
		return refuse(ReasonServiceConflict, "Service %s asks for %s in spec.loadBalancerIP, not %s; clear it and the migration resumes", name, ip, addr), true
	}
	if v, ok := svc.Annotations[paasv1.IPsAnnotation]; ok && !annotatedWith(svc, addr) {
		return refuse(ReasonServiceConflict, "Service %s asks for %q in %s, which does not hold %s; remove the annotation and the migration resumes", name, v, paasv1.IPsAnnotation, addr), true
	}
	if svc.Spec.Type == corev1.ServiceTypeLoadBalancer && !lbclass.Handles(svc, o.OwnClassOnly) {
		class := "none"
		if svc.Spec.LoadBalancerClass != nil {
			class = *svc.Spec.LoadBalancerClass
		}
		return refuse(ReasonServiceConflict, "Service %s is a LoadBalancer of class %s, which vip-allocator does not serve; the class cannot change, so recreate the Service as ClusterIP (without a class) and the migration resumes", name, class), true
	}
	return Decision{}, false
}

// cutoverLeft is how much longer the clone must stay: the Service must have
// held the IP (its IPAllocated condition True) for delay.
func cutoverLeft(svc *corev1.Service, delay time.Duration, now time.Time) time.Duration {
	c := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionIPAllocated)
	if c == nil || c.Status != metav1.ConditionTrue {
		return delay
	}
	return c.LastTransitionTime.Add(delay).Sub(now)
}

func hasLegacyFinalizers(vip *paasv1.VirtualIP) bool {
	return slices.ContainsFunc(vip.Finalizers, isLegacyFinalizer)
}

func isLegacyFinalizer(f string) bool {
	return f == paasv1.VirtualIPIPFinalizer || f == paasv1.VirtualIPServiceFinalizer
}

func annotatedWith(svc *corev1.Service, addr netip.Addr) bool {
	return slices.Contains(k8salloc.AnnotatedIPs(svc), addr)
}
