package admissionpolicy

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/internal/managedby"
)

// bundleNamespace is the namespace config/ names the operator's and the agents'
// ServiceAccounts in; Applier rewrites it to the install namespace.
const bundleNamespace = "system:serviceaccount:" + paasv1.DefaultNamespace + ":"

// Applier keeps the admission policies of config/admission applied,
// with the ServiceAccounts they name moved to the operator's namespace. It runs
// where no bundle can bring them (OLM: --admission-policies); deploy/bundle.yaml
// carries them itself. Its permissions are in the OLM bundle only
// (config/manifests/admission_policies_role.yaml), with every policy by name
// (TestAdmissionPoliciesRole keeps them in step with config/admission).
type Applier struct {
	Client    client.Client
	Namespace string
	// Files are config/admission's (admission.Files).
	Files fs.FS
	// Period is how often they are applied again, which puts back a policy
	// deleted or edited by hand.
	Period time.Duration
}

// Start applies the policies now and every Period until ctx ends (a manager
// Runnable).
func (a *Applier) Start(ctx context.Context) error {
	objs, err := Objects(a.Files, a.Namespace)
	if err != nil {
		return err
	}
	tick := time.NewTicker(a.Period)
	defer tick.Stop()
	for {
		if err := a.apply(ctx, objs); err != nil {
			ctrl.LoggerFrom(ctx).Error(err, "apply the admission policies (retried)")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

func (a *Applier) apply(ctx context.Context, objs []*unstructured.Unstructured) error {
	var errs []error
	for _, o := range objs {
		if err := a.Client.Patch(ctx, o.DeepCopy(), client.Apply, paasv1.FieldOwner, client.ForceOwnership); err != nil {
			errs = append(errs, fmt.Errorf("apply %s %s: %w", o.GetKind(), o.GetName(), err))
		}
	}
	return errors.Join(errs...)
}

// Objects reads the policies and bindings of files, naming the
// ServiceAccounts of namespace instead of the bundle's. Every policy in
// config/admission names them the same way ('system:serviceaccount:<ns>:<name>'),
// so any new one is moved along without code.
func Objects(files fs.FS, namespace string) ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, name := range names {
		data, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		data = bytes.ReplaceAll(data, []byte(bundleNamespace), []byte("system:serviceaccount:"+namespace+":"))
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("read %s: %w", name, err)
			}
			if !strings.HasPrefix(obj.GetAPIVersion(), "admissionregistration.k8s.io/") {
				continue // kustomization.yaml
			}
			labels := obj.GetLabels()
			if labels == nil {
				labels = map[string]string{}
			}
			labels[managedby.Label] = managedby.Operator
			obj.SetLabels(labels)
			out = append(out, obj)
		}
	}
	return out, nil
}
