package proxy

import (
	"context"
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/trust"
)

func refused(vip, reason string) trust.Refusal {
	r := trust.Refusal{Reason: reason, Detail: "because " + reason}
	if vip != "" {
		r.VIP = netip.MustParseAddr(vip)
	}
	return r
}

// TestConditionPatch: what the agents write on a Service, step by step: only
// their own condition, only when it changes, only for refusals every agent shares.
func TestConditionPatch(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u", Generation: 3}}
	svc.Status.Conditions = []metav1.Condition{{Type: paasv1.ConditionIPAllocated, Status: metav1.ConditionTrue, Reason: paasv1.ReasonAllocated}}
	now := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	for _, step := range []struct {
		desc     string
		refusals []trust.Refusal
		want     string // the patch; "" for none
	}{
		{desc: "nothing refused, no condition: nothing to write"},
		{desc: "a local refusal is this node's Event, not the shared condition", refusals: []trust.Refusal{refused("192.0.2.50", paasv1.ReasonLocalAddress)}},
		{desc: "a forged status and a reservation: the reservation leads, both told",
			refusals: []trust.Refusal{refused("192.0.2.99", paasv1.ReasonNotInLedger), refused("192.0.2.251", paasv1.ReasonReserved)},
			want:     `{"status":{"conditions":[{"lastTransitionTime":"2026-11-26T12:02:00Z","message":"192.0.2.251 because Reserved; 192.0.2.99 because NotInLedger","observedGeneration":3,"reason":"Reserved","status":"False","type":"vip.paas.org/Programmed"}]}}`},
		{desc: "the same again: nothing to write", refusals: []trust.Refusal{refused("192.0.2.251", paasv1.ReasonReserved), refused("192.0.2.99", paasv1.ReasonNotInLedger)}},
		{desc: "another refusal: the message changes, the transition time stays", refusals: []trust.Refusal{refused("", paasv1.ReasonInvalidSourceRanges)},
			want: `{"status":{"conditions":[{"lastTransitionTime":"2026-11-26T12:02:00Z","message":"because InvalidSourceRanges","observedGeneration":3,"reason":"InvalidSourceRanges","status":"False","type":"vip.paas.org/Programmed"}]}}`},
		{desc: "all carried: the condition goes, alone", want: `{"status":{"conditions":[{"$patch":"delete","type":"vip.paas.org/Programmed"}]}}`},
	} {
		got, err := conditionPatch(svc, step.refusals, now)
		if err != nil {
			t.Fatal(err)
		}
		if string(got) != step.want {
			t.Fatalf("%s:\ngot  %s\nwant %s", step.desc, got, step.want)
		}
		// The API server applies it.
		if c, present := programmedCondition(svc.Generation, step.refusals); present {
			if old := findProgrammed(svc); old != nil && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			} else {
				c.LastTransitionTime = metav1.NewTime(now)
			}
			svc.Status.Conditions = append(withoutProgrammed(svc), c)
		} else {
			svc.Status.Conditions = withoutProgrammed(svc)
		}
		now = now.Add(time.Minute)
	}
	if len(svc.Status.Conditions) != 1 || svc.Status.Conditions[0].Type != paasv1.ConditionIPAllocated {
		t.Fatalf("the operator's condition was touched: %v", svc.Status.Conditions)
	}
}

func findProgrammed(svc *corev1.Service) *metav1.Condition {
	for i := range svc.Status.Conditions {
		if svc.Status.Conditions[i].Type == paasv1.ConditionProgrammed {
			return &svc.Status.Conditions[i]
		}
	}
	return nil
}

func withoutProgrammed(svc *corev1.Service) []metav1.Condition {
	var out []metav1.Condition
	for _, c := range svc.Status.Conditions {
		if c.Type != paasv1.ConditionProgrammed {
			out = append(out, c)
		}
	}
	return out
}

// TestProgrammedConditionBounded: a status listing thousands of forged
// addresses still gives a message the API server accepts.
func TestProgrammedConditionBounded(t *testing.T) {
	var many []trust.Refusal
	for i := range 3000 {
		many = append(many, trust.Refusal{VIP: netip.AddrFrom4([4]byte{192, 0, 2, byte(i)}), Reason: paasv1.ReasonNotInLedger, Detail: strings.Repeat("x", 100)})
	}
	c, present := programmedCondition(1, many)
	if !present || len(c.Message) > 32768 || !strings.HasSuffix(c.Message, "(3000 refusals)") {
		t.Fatalf("present %v, %d bytes: ...%s", present, len(c.Message), c.Message[len(c.Message)-40:])
	}
}

// TestSettled: a refusal is reported once it has lasted the settle time, and
// forgotten once it is gone.
func TestSettled(t *testing.T) {
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{UID: "u"}}
	t0 := time.Date(2026, 11, 26, 12, 0, 0, 0, time.UTC)
	forged := []serviceReport{{svc: svc, refusals: []trust.Refusal{refused("192.0.2.99", paasv1.ReasonNotInLedger)}}}
	var since map[string]time.Time
	for _, step := range []struct {
		desc        string
		at          time.Duration
		reports     []serviceReport
		wantDue     int
		wantRequeue time.Duration
	}{
		{desc: "first seen: not yet", at: 0, reports: forged, wantRequeue: 2 * time.Second},
		{desc: "still there a second later: not yet", at: time.Second, reports: forged, wantRequeue: time.Second},
		{desc: "lasted the settle time: due", at: 2 * time.Second, reports: forged, wantDue: 1},
		{desc: "gone: nothing due, the Service still listed so its condition goes", at: 3 * time.Second, reports: []serviceReport{{svc: svc}}},
		{desc: "back: settles again from scratch", at: 4 * time.Second, reports: forged, wantRequeue: 2 * time.Second},
	} {
		var due []serviceReport
		var requeue time.Duration
		due, since, requeue = settled(step.reports, since, t0.Add(step.at), 2*time.Second)
		n := 0
		for _, d := range due {
			n += len(d.refusals)
		}
		if len(due) != len(step.reports) || n != step.wantDue || requeue != step.wantRequeue {
			t.Fatalf("%s: %d reports, %d due, requeue %s", step.desc, len(due), n, requeue)
		}
	}
}

// TestReportOncePerCluster: two agents report one shared refusal: the
// condition is written once and told in one Event; a local refusal is told by
// its node only; a fixed Service loses the condition.
func TestReportOncePerCluster(t *testing.T) {
	ctx := context.Background()
	svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u"}}
	c := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).WithObjects(svc).WithStatusSubresource(svc).Build()
	current := func() *corev1.Service {
		got := &corev1.Service{}
		if err := c.Get(ctx, client.ObjectKeyFromObject(svc), got); err != nil {
			t.Fatal(err)
		}
		return got
	}
	events := record.NewFakeRecorder(10)
	agents := []*Reporter{{Client: c, Recorder: events, NodeName: "node1"}, {Client: c, Recorder: events, NodeName: "node2"}}
	now := time.Now()
	for _, a := range agents {
		s := current()
		a.Report(ctx, []serviceReport{{svc: s, refusals: []trust.Refusal{refused("192.0.2.251", paasv1.ReasonReserved)}}}, now)
	}
	if got := len(events.Events); got != 1 {
		t.Fatalf("%d Events for one shared refusal, want 1", got)
	}
	if e := <-events.Events; !strings.HasPrefix(e, "Warning Reserved node node1: 192.0.2.251") {
		t.Fatalf("event %q", e)
	}
	if cond := findProgrammed(current()); cond == nil || cond.Reason != paasv1.ReasonReserved {
		t.Fatalf("condition %+v", cond)
	}
	agents[1].Report(ctx, []serviceReport{{svc: current(), refusals: []trust.Refusal{refused("192.0.2.251", paasv1.ReasonReserved), refused("192.0.2.5", paasv1.ReasonLocalAddress)}}}, now)
	if e := <-events.Events; !strings.HasPrefix(e, "Warning LocalAddress node node2: 192.0.2.5") || len(events.Events) != 0 {
		t.Fatalf("event %q, %d more", e, len(events.Events))
	}
	for _, a := range agents {
		a.Report(ctx, []serviceReport{{svc: current()}}, now)
	}
	if cond := findProgrammed(current()); cond != nil {
		t.Fatalf("condition left: %+v", cond)
	}
}
