package admissionpolicy

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/client-go/tools/record"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Checker checks that the admission policies of config/admission are in
// force, with the ServiceAccounts they name moved to the operator's
// namespace. It runs where no bundle can bring them (OLM: --admission-policies).
// Its permission is get on every policy and binding by name, in the OLM bundle
// only (config/manifests/admission_policies_role.yaml; TestAdmissionPoliciesRole
// keeps the names in step with config/admission).
type Checker struct {
	// Reader reads without a cache (the manager's API reader): get by name is
	// all the operator may do with these objects.
	Reader    client.Reader
	Recorder  record.EventRecorder
	Namespace string
	// Files are config/admission's (admission.Files).
	Files fs.FS
	// Period is how often they are checked again.
	Period time.Duration

	// last is the State reported for each object, so that Events mark changes.
	last map[Key]State
}

// Start checks the policies now and every Period until ctx ends (a manager
// Runnable).
func (c *Checker) Start(ctx context.Context) error {
	want, err := Objects(c.Files, c.Namespace)
	if err != nil {
		return err
	}
	tick := time.NewTicker(c.Period)
	defer tick.Stop()
	for {
		if err := c.Check(ctx, want); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "check the admission policies (retried)")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Check reads each object of want and reports its State: the metric always,
// an Event and a log line when it changed. An object it could not read keeps
// its last report.
func (c *Checker) Check(ctx context.Context, want []*unstructured.Unstructured) error {
	got := map[Key]*unstructured.Unstructured{}
	var read []*unstructured.Unstructured
	var errs []error
	for _, w := range want {
		o := &unstructured.Unstructured{}
		o.SetGroupVersionKind(w.GroupVersionKind())
		err := c.Reader.Get(ctx, client.ObjectKey{Name: w.GetName()}, o)
		switch {
		case apierrors.IsNotFound(err):
		case err != nil:
			errs = append(errs, fmt.Errorf("get %s %s: %w", w.GetKind(), w.GetName(), err))
			continue
		default:
			got[KeyOf(w)] = o
		}
		read = append(read, w)
	}
	for i, f := range Compare(read, got) {
		c.report(ctx, read[i], f)
	}
	return errors.Join(errs...)
}

func (c *Checker) report(ctx context.Context, obj *unstructured.Unstructured, f Finding) {
	gauge := 0.0
	if f.State == InForce {
		gauge = 1
	}
	inForce.WithLabelValues(f.Kind, f.Name).Set(gauge)
	key := Key{f.Kind, f.Name}
	if c.last == nil {
		c.last = map[Key]State{}
	}
	before, seen := c.last[key]
	c.last[key] = f.State
	if before == f.State || (!seen && f.State == InForce) {
		return
	}
	msg := Message(f)
	ctrl.LoggerFrom(ctx).Info(msg, "kind", f.Kind, "name", f.Name, "state", f.State)
	if c.Recorder == nil {
		return
	}
	switch f.State {
	case InForce:
		c.Recorder.Event(obj, corev1.EventTypeNormal, paasv1.EventAdmissionPolicyInForce, msg)
	case Missing:
		c.Recorder.Event(obj, corev1.EventTypeWarning, paasv1.EventAdmissionPolicyMissing, msg)
	case Altered:
		c.Recorder.Event(obj, corev1.EventTypeWarning, paasv1.EventAdmissionPolicyAltered, msg)
	}
}

// Message tells a person what f means and what to do.
func Message(f Finding) string {
	switch f.State {
	case Missing:
		return fmt.Sprintf("%s %s is missing: apply deploy/admission-policies.yaml for this namespace (docs/install.md, OLM)", f.Kind, f.Name)
	case Altered:
		return fmt.Sprintf("%s %s differs from the shipped one at %s: apply deploy/admission-policies.yaml for this namespace again (docs/install.md, OLM)", f.Kind, f.Name, f.Field)
	default:
		return fmt.Sprintf("%s %s is in force as shipped", f.Kind, f.Name)
	}
}
