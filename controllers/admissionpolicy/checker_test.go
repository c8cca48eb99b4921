package admissionpolicy

import (
	"context"
	"errors"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus/testutil"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// cluster is the narrow fake the Checker reads: objects by kind and name.
type cluster struct {
	objs map[Key]*unstructured.Unstructured
	err  error
}

func (c *cluster) Get(_ context.Context, key client.ObjectKey, obj client.Object, _ ...client.GetOption) error {
	if c.err != nil {
		return c.err
	}
	u := obj.(*unstructured.Unstructured)
	o, ok := c.objs[Key{u.GetKind(), key.Name}]
	if !ok {
		return apierrors.NewNotFound(schema.GroupResource{Group: "admissionregistration.k8s.io", Resource: u.GetKind()}, key.Name)
	}
	o.DeepCopyInto(u)
	return nil
}

func (c *cluster) List(context.Context, client.ObjectList, ...client.ListOption) error {
	return errors.New("the checker gets by name only")
}

// TestCheckerReportsChanges: one Checker, the cluster changing under it step
// by step; an Event marks each change of an object's state, never a repeat,
// and the metric follows every check.
func TestCheckerReportsChanges(t *testing.T) {
	want := objects(t, strings.Split(shipped, "\n---\n")...)
	policy, binding := Key{"ValidatingAdmissionPolicy", "p"}, Key{"ValidatingAdmissionPolicyBinding", "p"}
	cl := &cluster{objs: map[Key]*unstructured.Unstructured{}}
	rec := record.NewFakeRecorder(16)
	c := &Checker{Reader: cl, Recorder: rec}
	altered := objects(t, served)[0]
	altered.Object["spec"].(map[string]any)["validations"] = []any{}
	for _, step := range []struct {
		desc    string
		change  func()
		events  []string // "Type Reason" of each Event, in order
		metric  float64  // the policy's vip_allocator_admission_policy_in_force
		wantErr bool
	}{
		{desc: "nothing applied: both missing", change: func() {},
			events: []string{"Warning AdmissionPolicyMissing", "Warning AdmissionPolicyMissing"}},
		{desc: "still nothing: no Event again", change: func() {}},
		{desc: "an administrator applies them: back in force", change: func() {
			cl.objs[policy], cl.objs[binding] = objects(t, served)[0], want[1].DeepCopy()
		}, events: []string{"Normal AdmissionPolicyInForce", "Normal AdmissionPolicyInForce"}, metric: 1},
		{desc: "the API server refuses a read: the last report stands", change: func() { cl.err = errors.New("forbidden") },
			metric: 1, wantErr: true},
		{desc: "someone empties the policy's validations", change: func() { cl.err, cl.objs[policy] = nil, altered },
			events: []string{"Warning AdmissionPolicyAltered"}},
		{desc: "someone deletes it", change: func() { delete(cl.objs, policy) },
			events: []string{"Warning AdmissionPolicyMissing"}},
	} {
		step.change()
		err := c.Check(context.Background(), want)
		if (err != nil) != step.wantErr {
			t.Errorf("%s: error %v, want one: %v", step.desc, err, step.wantErr)
		}
		var got []string
		for len(rec.Events) > 0 {
			e := <-rec.Events
			f := strings.Fields(e)
			got = append(got, f[0]+" "+f[1])
		}
		if strings.Join(got, ",") != strings.Join(step.events, ",") {
			t.Errorf("%s: Events %q, want %q", step.desc, got, step.events)
		}
		if m := testutil.ToFloat64(inForce.WithLabelValues(policy.Kind, policy.Name)); m != step.metric {
			t.Errorf("%s: metric %v, want %v", step.desc, m, step.metric)
		}
	}
}

// TestCheckerQuietWhenInForceFromTheStart: an install whose policies are in
// force from the first check records no Event.
func TestCheckerQuietWhenInForceFromTheStart(t *testing.T) {
	want := objects(t, strings.Split(shipped, "\n---\n")...)
	cl := &cluster{objs: map[Key]*unstructured.Unstructured{
		KeyOf(want[0]): objects(t, served)[0], KeyOf(want[1]): want[1].DeepCopy()}}
	rec := record.NewFakeRecorder(4)
	if err := (&Checker{Reader: cl, Recorder: rec}).Check(context.Background(), want); err != nil {
		t.Fatal(err)
	}
	if len(rec.Events) != 0 {
		t.Errorf("Event %q, want none", <-rec.Events)
	}
}
