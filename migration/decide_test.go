package migration

import (
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// legacy is the state the original operator leaves: a Valid VirtualIP, its
// clone, its ledger object, its GroupSegmentMapping, a ClusterIP target.
func legacy() Observed {
	vip := &paasv1.VirtualIP{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-vip", UID: "vip-uid",
			Annotations: map[string]string{paasv1.MigrateAnnotation: ""},
			Finalizers:  []string{paasv1.VirtualIPIPFinalizer, paasv1.VirtualIPServiceFinalizer}},
		Spec: paasv1.VirtualIPSpec{Service: "web"},
		Status: paasv1.VirtualIPStatus{State: paasv1.VirtualIPValid, IP: "192.0.2.10", Service: "web",
			ClonedService: "web-vip-keepalived-clone", GSM: "segment-a", KeepalivedGroup: "keepalived/group-a"},
	}
	return Observed{
		VIP: vip,
		Service: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "svc-uid"},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP}},
		Clone: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-vip-keepalived-clone"}},
		Ledger: &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.10", Labels: map[string]string{paasv1.LegacyGSMLabel: "segment-a"},
			Annotations: map[string]string{paasv1.OwnerAnnotation: "shop/web-vip"}}},
		GSM: &paasv1.GroupSegmentMapping{ObjectMeta: metav1.ObjectMeta{Name: "segment-a"},
			Spec: paasv1.GroupSegmentMappingSpec{Segment: "192.0.2.0/24", ExcludedIPs: []string{"192.0.2.1"}}},
		CutoverDelay: 5 * time.Second,
		Now:          t0,
	}
}

func group(name, segment string, excluded ...string) paasv1.IPGroup {
	return paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: paasv1.IPGroupSpec{Segment: segment, ExcludedIPs: excluded}}
}

// holding is what the Service controller does once the Service asks for the IP.
func holding(o *Observed, at time.Time) {
	o.Service.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "192.0.2.10"}}
	meta.SetStatusCondition(&o.Service.Status.Conditions, metav1.Condition{Type: paasv1.ConditionIPAllocated,
		Status: metav1.ConditionTrue, Reason: paasv1.ReasonAllocated, LastTransitionTime: metav1.NewTime(at)})
	o.Ledger.Spec.Owner = &paasv1.IPOwner{Namespace: "shop", Name: "web", UID: "svc-uid"}
}

// TestHappyPath walks one migration: each step observes what the previous
// one's write (or the Service controller, or time) changed.
func TestHappyPath(t *testing.T) {
	o := legacy()
	steps := []struct {
		desc       string
		change     func(*Observed)
		action     Action
		state      string
		requeue    time.Duration
		msgContain string
	}{
		{"no IPGroup covers the IP: one is made from the GSM", nil, ActionCreateIPGroup, StatePreparingIPGroup, 0, "from GroupSegmentMapping segment-a"},
		{"the group exists: the Service is converted", func(o *Observed) { o.Groups = append(o.Groups, *Decide(*o).IPGroup) },
			ActionConvertService, StateConvertingService, 0, "to type LoadBalancer with 192.0.2.10 from IPGroup segment-a"},
		{"converted, not yet served: wait", func(o *Observed) {
			o.Service.Spec.Type, o.Service.Spec.LoadBalancerIP = corev1.ServiceTypeLoadBalancer, "192.0.2.10"
		}, ActionNone, StateConvertingService, 0, "converting"},
		{"the Service controller refuses: its reason shows", func(o *Observed) {
			meta.SetStatusCondition(&o.Service.Status.Conditions, metav1.Condition{Type: paasv1.ConditionIPAllocated,
				Status: metav1.ConditionFalse, Reason: paasv1.ReasonRequestedIPInUse, Message: "in use"})
		}, ActionNone, StateConvertingService, 0, "RequestedIPInUse: in use"},
		{"served 2 s ago: the clone stays for the rest of the cutover", func(o *Observed) { holding(o, t0.Add(-2*time.Second)) },
			ActionNone, StateCuttingOver, 3 * time.Second, "clone shop/web-vip-keepalived-clone"},
		{"an announcer that has not announced holds the clone", func(o *Observed) {
			o.Now = t0.Add(time.Minute)
			meta.SetStatusCondition(&o.Service.Status.Conditions, metav1.Condition{Type: paasv1.ConditionAnnounced, Status: metav1.ConditionFalse, Message: "no eligible node"})
		}, ActionNone, StateCuttingOver, 0, "no eligible node"},
		{"announced and held long enough: the clone goes", func(o *Observed) {
			meta.SetStatusCondition(&o.Service.Status.Conditions, metav1.Condition{Type: paasv1.ConditionAnnounced, Status: metav1.ConditionTrue})
		}, ActionDeleteClone, StateCuttingOver, 0, ""},
		{"clone gone: loadBalancerIP is released", func(o *Observed) { o.Clone = nil }, ActionReleaseLoadBalancerIP, StateCleaningUp, 0, ""},
		{"then the legacy finalizers", func(o *Observed) { o.Service.Spec.LoadBalancerIP = "" }, ActionRemoveFinalizers, StateCleaningUp, 0, ""},
		{"then Migrated", func(o *Observed) { o.VIP.Finalizers = nil }, ActionMarkMigrated, paasv1.VirtualIPMigrated, 0, "holding 192.0.2.10 from IPGroup segment-a"},
		{"Migrated stays Migrated", func(o *Observed) { o.VIP.Status.State = paasv1.VirtualIPMigrated }, ActionNone, paasv1.VirtualIPMigrated, 0, ""},
	}
	for _, s := range steps {
		if s.change != nil {
			s.change(&o)
		}
		d := Decide(o)
		if d.Refused || d.Action != s.action || d.State != s.state || d.RequeueAfter != s.requeue || !strings.Contains(d.Message, s.msgContain) {
			t.Fatalf("%s: got %+v; want action %q state %q requeue %s message containing %q", s.desc, d, s.action, s.state, s.requeue, s.msgContain)
		}
		if d.Action == ActionCreateIPGroup {
			g := d.IPGroup
			if g.Name != "segment-a" || g.Spec.Segment != "192.0.2.0/24" || len(g.Spec.ExcludedIPs) != 1 || *g.Spec.AutoAssign {
				t.Fatalf("%s: IPGroup %+v is not the GSM's segment and exclusions with autoAssign false", s.desc, g.Spec)
			}
		}
		// Running the same step twice decides the same: a repeated reconcile is harmless.
		if again := Decide(o); again.Action != d.Action || again.State != d.State {
			t.Fatalf("%s: not idempotent: %+v then %+v", s.desc, d, again)
		}
	}
}

func TestSpecIPKeepsLoadBalancerIP(t *testing.T) {
	o := legacy()
	o.VIP.Spec.IP = "192.0.2.10"
	o.Groups = []paasv1.IPGroup{group("existing", "192.0.2.0/25")}
	o.Service.Spec.Type, o.Service.Spec.LoadBalancerIP = corev1.ServiceTypeLoadBalancer, "192.0.2.10"
	holding(&o, t0.Add(-time.Minute))
	o.Clone = nil
	if d := Decide(o); d.Action != ActionRemoveFinalizers {
		t.Fatalf("with spec.ip set, spec.loadBalancerIP stays: got %+v", d)
	}
}

func TestRefusals(t *testing.T) {
	cases := []struct {
		desc   string
		change func(*Observed)
		reason string
		fix    string // the message must name the fix
	}{
		{"not Valid", func(o *Observed) { o.VIP.Status.State = "Error" }, ReasonNotValid, "create Service shop/web as type LoadBalancer directly"},
		{"no IP", func(o *Observed) { o.VIP.Status.IP = "" }, ReasonNoIP, "as type LoadBalancer directly"},
		{"target Service missing", func(o *Observed) { o.Service = nil }, ReasonServiceNotFound, "create it"},
		{"target is a LoadBalancer with another IP", func(o *Observed) {
			o.Service.Spec.Type = corev1.ServiceTypeLoadBalancer
			o.Service.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.7"}}
		}, ReasonServiceConflict, "already a LoadBalancer with 198.51.100.7"},
		{"target asks for another IP", func(o *Observed) { o.Service.Spec.LoadBalancerIP = "192.0.2.99" }, ReasonServiceConflict, "clear it"},
		{"target asks for another IP by annotation", func(o *Observed) {
			o.Service.Annotations = map[string]string{paasv1.IPsAnnotation: "192.0.2.99"}
		}, ReasonServiceConflict, "remove the annotation"},
		{"target is another implementation's LoadBalancer", func(o *Observed) {
			o.Service.Spec.Type, o.Service.Spec.LoadBalancerClass = corev1.ServiceTypeLoadBalancer, ptr.To("example.com/other")
		}, ReasonServiceConflict, "recreate the Service"},
		{"ExternalName target", func(o *Observed) { o.Service.Spec.Type = corev1.ServiceTypeExternalName }, ReasonServiceConflict, "ClusterIP Service"},
		{"ledger held by another Service", func(o *Observed) {
			o.Ledger.Spec.Owner = &paasv1.IPOwner{Namespace: "other", Name: "x", UID: "x"}
		}, ReasonIPInUse, "free it there"},
		{"IP excluded from the covering group", func(o *Observed) {
			o.Groups = []paasv1.IPGroup{group("g", "192.0.2.0/24", "192.0.2.10")}
		}, ReasonIPExcluded, "remove it from excludedIPs"},
		{"covering group does not admit the Service", func(o *Observed) {
			g := group("g", "192.0.2.0/24")
			g.Spec.ServiceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "edge"}}
			o.Groups = []paasv1.IPGroup{g}
		}, ReasonGroupNotAllowed, "change the selectors"},
		{"no group and no GSM", func(o *Observed) { o.GSM = nil }, ReasonNoIPGroup, "create an IPGroup whose segment holds 192.0.2.10"},
		{"GSM would overlap an existing group", func(o *Observed) {
			o.Groups = []paasv1.IPGroup{group("small", "192.0.2.128/25")}
		}, ReasonIPGroupConflict, "widen that group"},
		{"IP outside the GSM segment", func(o *Observed) { o.GSM.Spec.Segment = "198.51.100.0/24" }, ReasonNoIPGroup, "create an IPGroup"},
	}
	for _, c := range cases {
		o := legacy()
		c.change(&o)
		d := Decide(o)
		if !d.Refused || d.Action != ActionNone || d.State != paasv1.VirtualIPError || d.Reason != c.reason || !strings.Contains(d.Message, c.fix) {
			t.Errorf("%s: got %+v; want refusal %s naming %q", c.desc, d, c.reason, c.fix)
		}
	}
}

// A refusal after the start sets state Error; fixing it must resume the
// migration, not refuse it as "not Valid".
func TestRefusalAfterStartResumes(t *testing.T) {
	o := legacy()
	o.Service = nil
	d := Decide(o)
	o.VIP.Status.State = d.State
	meta.SetStatusCondition(&o.VIP.Status.Conditions, metav1.Condition{Type: paasv1.VirtualIPConditionMigrated, Status: metav1.ConditionFalse, Reason: d.Reason})
	o.Service = legacy().Service
	if d := Decide(o); d.Refused || d.Action != ActionCreateIPGroup {
		t.Fatalf("after the Service appears the migration resumes: got %+v", d)
	}
	// But a VirtualIP refused as not Valid stays refused until it is Valid.
	o.VIP.Status.State = "Error"
	o.VIP.Status.Conditions = nil
	meta.SetStatusCondition(&o.VIP.Status.Conditions, metav1.Condition{Type: paasv1.VirtualIPConditionMigrated, Status: metav1.ConditionFalse, Reason: ReasonNotValid})
	if d := Decide(o); d.Reason != ReasonNotValid {
		t.Fatalf("a not-Valid VirtualIP stays refused: got %+v", d)
	}
}

func TestExistingGroupIsUsedNeverASecond(t *testing.T) {
	o := legacy()
	o.Groups = []paasv1.IPGroup{group("wide", "192.0.0.0/16"), group("other", "203.0.113.0/24")}
	if d := Decide(o); d.Action != ActionConvertService || !strings.Contains(d.Message, "IPGroup wide") {
		t.Fatalf("the covering group is used: got %+v", d)
	}
}

func TestPlanListsEveryStep(t *testing.T) {
	p := PlanFor(legacy())
	want := []string{"create IPGroup segment-a", "make Service shop/web type LoadBalancer", "wait: the operator gives", "wait 5s: the new data path",
		"delete the keepalived clone", "clear spec.loadBalancerIP", "remove the legacy finalizers", "state Migrated"}
	if p.Blocked != "" || len(p.Steps) != len(want) {
		t.Fatalf("plan: %+v", p)
	}
	for i, w := range want {
		if !strings.HasPrefix(p.Steps[i], w) {
			t.Errorf("step %d: %q, want %q...", i+1, p.Steps[i], w)
		}
	}
	o := legacy()
	o.Service = nil
	if p := PlanFor(o); p.Blocked == "" || !strings.Contains(p.Blocked, "does not exist") {
		t.Fatalf("blocked plan: %+v", p)
	}
	if o := legacy(); o.Service.Spec.Type != corev1.ServiceTypeClusterIP {
		t.Fatal("PlanFor must not change what it was given")
	}
}

func TestLegacyARPExpected(t *testing.T) {
	o := legacy()
	for _, c := range []struct {
		desc      string
		annotated bool
		state     string
		want      bool
	}{
		{"legacy, not migrating: the new announcer does not carry it", false, paasv1.VirtualIPValid, false},
		{"migrating", true, StateCuttingOver, true},
		{"blocked", true, paasv1.VirtualIPError, true},
		{"migrated: keepalived let go", true, paasv1.VirtualIPMigrated, false},
	} {
		vip := o.VIP.DeepCopy()
		if !c.annotated {
			vip.Annotations = nil
		}
		vip.Status.State = c.state
		if got := vip.LegacyARPExpected(); got != c.want {
			t.Errorf("%s: got %v, want %v", c.desc, got, c.want)
		}
	}
}

func TestIPv6VirtualIP(t *testing.T) {
	o := legacy()
	o.VIP.Status.IP = "2001:db8:1::10"
	o.GSM.Spec = paasv1.GroupSegmentMappingSpec{Segment: "2001:db8:1::/64", ExcludedIPs: []string{"2001:db8:1::1"}}
	d := Decide(o)
	if d.Action != ActionCreateIPGroup || d.IPGroup.Spec.Segment != "2001:db8:1::/64" {
		t.Fatalf("IPv6 GSM becomes an IPv6 IPGroup: got %+v", d)
	}
	o.Groups = []paasv1.IPGroup{*d.IPGroup}
	if d := Decide(o); d.Action != ActionConvertService || !strings.Contains(d.Message, "2001:db8:1::10") {
		t.Fatalf("then the Service is converted: got %+v", d)
	}
}
