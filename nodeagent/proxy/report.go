package proxy

import (
	"context"
	"encoding/json"
	"fmt"
	"sort"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/trust"
)

// Telling on a Service what the agents refuse to carry (package trust). Every
// agent sees the ledger, the Nodes and the Service alike, so every agent
// computes the same paasv1.ConditionProgrammed for the refusals that do not
// depend on the node: writing it from each agent is idempotent, and no agent
// writes it differently. The agent whose patch sets it raises the Warning
// Event; a refusal of one node only (ReasonLocalAddress) is that node's Event. The condition is patched alone (a strategic merge
// patch keyed by the condition type), so the operator's conditions are never
// touched, and the operator never writes this one.

// agentFieldOwner is the field manager of the agents' Service status patches.
const agentFieldOwner = client.FieldOwner("vip-allocator-agent")

// serviceReport is what a pass refused of one Service (nothing: a condition
// the Service still carries from an earlier refusal goes).
type serviceReport struct {
	svc      *corev1.Service
	refusals []trust.Refusal
}

// Reporter writes the agents' condition and this agent's Events on Services.
type Reporter struct {
	Client   client.Client
	Recorder record.EventRecorder
	NodeName string
	// Settle is how long a refusal must last before it is reported: the
	// operator writes the ledger before the status, but the caches may show
	// them in the other order for a moment (the data plane refuses at once).
	Settle time.Duration

	// since is when each refusal (by key) was first seen; evented holds those
	// an Event was raised for. Only Reconcile (one worker) uses them.
	since   map[string]time.Time
	evented map[string]bool
}

// Report writes what changed and returns when to look again for refusals
// still settling (0: none).
func (r *Reporter) Report(ctx context.Context, reports []serviceReport, now time.Time) time.Duration {
	countRefusals(reports)
	due, since, requeue := settled(reports, r.since, now, r.Settle)
	r.since = since
	evented := map[string]bool{}
	for _, rep := range due {
		patched, err := r.writeCondition(ctx, rep)
		if err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "report refused addresses", "service", rep.svc.Namespace+"/"+rep.svc.Name)
		}
		for _, ref := range rep.refusals {
			key := refusalKey(rep.svc, ref)
			// A refusal every agent shares is told once, by the agent whose
			// patch set the condition, not once per node; this node's own
			// refusal is told by this node.
			if (ref.Local() || patched) && !r.evented[key] && r.Recorder != nil {
				r.Recorder.Event(rep.svc, corev1.EventTypeWarning, ref.Reason, fmt.Sprintf("node %s: %s", r.NodeName, ref))
				evented[key] = true
			}
			if r.evented[key] {
				evented[key] = true
			}
		}
	}
	r.evented = evented
	return requeue
}

// settled keeps, of each report, the refusals first seen at least settle ago
// (every report stays, with none when none is due), remembers when the
// others were first seen, and says when the next one is due.
func settled(reports []serviceReport, prev map[string]time.Time, now time.Time, settle time.Duration) (due []serviceReport, since map[string]time.Time, requeue time.Duration) {
	since = map[string]time.Time{}
	for _, rep := range reports {
		out := serviceReport{svc: rep.svc}
		for _, ref := range rep.refusals {
			key := refusalKey(rep.svc, ref)
			first, ok := prev[key]
			if !ok {
				first = now
			}
			since[key] = first
			if left := settle - now.Sub(first); left > 0 {
				if requeue == 0 || left < requeue {
					requeue = left
				}
				continue
			}
			out.refusals = append(out.refusals, ref)
		}
		due = append(due, out)
	}
	return due, since, requeue
}

func refusalKey(svc *corev1.Service, r trust.Refusal) string {
	return string(svc.UID) + "|" + r.Reason + "|" + r.String()
}

// reasonRank orders the reasons of the condition: the first refused one,
// by this order, is the condition's reason.
var reasonRank = map[string]int{paasv1.ReasonReserved: 0, paasv1.ReasonNotInLedger: 1, paasv1.ReasonInvalidSourceRanges: 2}

// programmedCondition is paasv1.ConditionProgrammed for a Service with these
// refusals; present is false when none is shared by every agent (the
// condition must then be absent).
func programmedCondition(generation int64, refusals []trust.Refusal) (c metav1.Condition, present bool) {
	var shared []trust.Refusal
	for _, r := range refusals {
		if !r.Local() {
			shared = append(shared, r)
		}
	}
	if len(shared) == 0 {
		return c, false
	}
	sort.SliceStable(shared, func(i, j int) bool { return reasonRank[shared[i].Reason] < reasonRank[shared[j].Reason] })
	parts := make([]string, 0, len(shared))
	for _, r := range shared {
		parts = append(parts, r.String())
	}
	msg := strings.Join(parts, "; ")
	const maxMessage = 4096 // far below the API's 32 KiB, whatever a status lists
	if len(msg) > maxMessage {
		msg = msg[:maxMessage] + fmt.Sprintf("... (%d refusals)", len(shared))
	}
	return metav1.Condition{Type: paasv1.ConditionProgrammed, Status: metav1.ConditionFalse, Reason: shared[0].Reason,
		Message: msg, ObservedGeneration: generation}, true
}

// conditionPatch is the strategic merge patch that brings svc's
// ConditionProgrammed to what refusals say, touching no other condition; nil
// when svc already says so.
func conditionPatch(svc *corev1.Service, refusals []trust.Refusal, now time.Time) ([]byte, error) {
	want, present := programmedCondition(svc.Generation, refusals)
	have := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionProgrammed)
	var entry map[string]any
	switch {
	case !present && have == nil:
		return nil, nil
	case !present:
		entry = map[string]any{"$patch": "delete", "type": paasv1.ConditionProgrammed}
	case have != nil && have.Status == want.Status && have.Reason == want.Reason && have.Message == want.Message && have.ObservedGeneration == want.ObservedGeneration:
		return nil, nil
	default:
		want.LastTransitionTime = metav1.NewTime(now)
		if have != nil && have.Status == want.Status {
			want.LastTransitionTime = have.LastTransitionTime
		}
		raw, err := json.Marshal(want)
		if err != nil {
			return nil, err
		}
		if err := json.Unmarshal(raw, &entry); err != nil {
			return nil, err
		}
	}
	return json.Marshal(map[string]any{"status": map[string]any{"conditions": []any{entry}}})
}

// writeCondition patches rep's Service when its condition must change, and
// says whether it did.
func (r *Reporter) writeCondition(ctx context.Context, rep serviceReport) (bool, error) {
	patch, err := conditionPatch(rep.svc, rep.refusals, time.Now())
	if err != nil || patch == nil {
		return false, err
	}
	err = r.Client.Status().Patch(ctx, rep.svc.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, patch), agentFieldOwner)
	if client.IgnoreNotFound(err) != nil {
		return false, fmt.Errorf("patch condition %s of Service %s/%s: %w", paasv1.ConditionProgrammed, rep.svc.Namespace, rep.svc.Name, err)
	}
	return err == nil, nil
}

// countRefusals sets the refused-addresses gauge from this pass, settled or
// not: the data plane refuses at once.
func countRefusals(reports []serviceReport) {
	counts := map[string]int{paasv1.ReasonNodeAddress: 0, paasv1.ReasonLocalAddress: 0, paasv1.ReasonNotInLedger: 0, paasv1.ReasonInvalidSourceRanges: 0}
	for _, rep := range reports {
		for _, ref := range rep.refusals {
			counts[ref.Reason]++
		}
	}
	for reason, n := range counts {
		refusedAddresses.WithLabelValues(reason).Set(float64(n))
	}
}
