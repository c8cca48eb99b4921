package migration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// ObserveInstallation reads, in one list per kind, what PlanUpgrade decides on.
func ObserveInstallation(ctx context.Context, c client.Reader, namespace string, ownClassOnly bool) (Installation, error) {
	in := Installation{Namespace: namespace, OwnClassOnly: ownClassOnly}
	lists := []struct {
		what string
		list client.ObjectList
		opts []client.ListOption
	}{
		{"Deployments", &appsv1.DeploymentList{}, nil},
		{"ValidatingWebhookConfigurations", &admissionregistrationv1.ValidatingWebhookConfigurationList{}, nil},
		{"MutatingWebhookConfigurations", &admissionregistrationv1.MutatingWebhookConfigurationList{}, nil},
		{"ClusterRoleBindings", &rbacv1.ClusterRoleBindingList{}, nil},
		{"RoleBindings", &rbacv1.RoleBindingList{}, []client.ListOption{client.InNamespace(namespace)}},
		{"ServiceAccounts", &corev1.ServiceAccountList{}, []client.ListOption{client.InNamespace(namespace)}},
		{"Services", &corev1.ServiceList{}, nil},
		{"IPs", &paasv1.IPList{}, nil},
		{"IPGroups", &paasv1.IPGroupList{}, nil},
		{"VirtualIPs", &paasv1.VirtualIPList{}, nil},
	}
	for _, l := range lists {
		if err := c.List(ctx, l.list, l.opts...); err != nil {
			// 1.0 has no VirtualIP CRD: before our bundle is applied there are none.
			if meta.IsNoMatchError(err) {
				continue
			}
			return Installation{}, fmt.Errorf("list %s: %w", l.what, err)
		}
		switch list := l.list.(type) {
		case *appsv1.DeploymentList:
			in.Deployments = list.Items
		case *admissionregistrationv1.ValidatingWebhookConfigurationList:
			in.ValidatingWebhooks = list.Items
		case *admissionregistrationv1.MutatingWebhookConfigurationList:
			in.MutatingWebhooks = list.Items
		case *rbacv1.ClusterRoleBindingList:
			in.ClusterRoleBindings = list.Items
		case *rbacv1.RoleBindingList:
			in.RoleBindings = list.Items
		case *corev1.ServiceAccountList:
			in.ServiceAccounts = list.Items
		case *corev1.ServiceList:
			in.Services = list.Items
		case *paasv1.IPList:
			in.Ledger = list.Items
		case *paasv1.IPGroupList:
			in.Groups = list.Items
		case *paasv1.VirtualIPList:
			in.VirtualIPs = list.Items
		}
	}
	return in, nil
}

// ApplyUpgrade deletes what p removes, each object only if it is still the one
// the plan saw (its uid), and says so on out. Running it again finds nothing.
func ApplyUpgrade(ctx context.Context, c client.Writer, p UpgradePlan, out io.Writer) error {
	var errs []error
	for _, r := range p.Remove {
		obj, err := emptyObject(r.Kind)
		if err != nil {
			return err
		}
		obj.SetNamespace(r.Namespace)
		obj.SetName(r.Name)
		uid := r.UID
		err = c.Delete(ctx, obj, client.Preconditions{UID: &uid}, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if apierrors.IsConflict(err) {
			errs = append(errs, fmt.Errorf("delete %s: it is no longer the object the plan saw (uid %s), so it is left; plan again: %w", r.Object, r.UID, err))
			continue
		}
		if client.IgnoreNotFound(err) != nil {
			errs = append(errs, fmt.Errorf("delete %s: %w", r.Object, err))
			continue
		}
		fmt.Fprintf(out, "deleted %s\n", r.Object)
	}
	return errors.Join(errs...)
}

func emptyObject(kind string) (client.Object, error) {
	switch kind {
	case "Deployment":
		return &appsv1.Deployment{}, nil
	case "ValidatingWebhookConfiguration":
		return &admissionregistrationv1.ValidatingWebhookConfiguration{}, nil
	case "MutatingWebhookConfiguration":
		return &admissionregistrationv1.MutatingWebhookConfiguration{}, nil
	case "ClusterRoleBinding":
		return &rbacv1.ClusterRoleBinding{}, nil
	case "RoleBinding":
		return &rbacv1.RoleBinding{}, nil
	case "ServiceAccount":
		return &corev1.ServiceAccount{}, nil
	}
	return nil, fmt.Errorf("no removal of kind %s (a bug)", kind)
}

// Write prints the plan for a person: what "migrate upgrade" removes, what the
// operator adopts, what stays to do and what would go wrong.
func (p UpgradePlan) Write(out io.Writer, namespace string) {
	fmt.Fprintf(out, "Upgrade of the original operator (namespace %s)\n", namespace)
	if p.Done() {
		fmt.Fprintln(out, "  nothing of the original operator is left to remove or adopt")
	}
	if len(p.Remove) > 0 {
		fmt.Fprintln(out, "vip-allocator migrate upgrade deletes:")
		for _, r := range p.Remove {
			fmt.Fprintf(out, "  %s: %s\n", r.Object, r.Why)
		}
	}
	if len(p.Untouched) > 0 {
		fmt.Fprintln(out, "not touched (they resemble the original's objects, but are not what its bundle installs):")
		for _, u := range p.Untouched {
			fmt.Fprintf(out, "  %s: %s\n", u.Object, u.Why)
		}
	}
	if len(p.Adopt)+len(p.Finalizers)+len(p.Orphans) > 0 {
		fmt.Fprintln(out, "the operator adopts (at start, and whenever it sees them):")
		for _, a := range p.Adopt {
			fmt.Fprintf(out, "  ledger IP %s: owner Service %s set in place, %s kept\n", a.IP, a.Service, a.Address)
		}
		for _, f := range p.Finalizers {
			if f.Deleting {
				released := "nothing"
				if len(f.Release) > 0 {
					released = strings.Join(f.Release, ", ")
				}
				fmt.Fprintf(out, "  Service %s (being deleted): releases %s, removes finalizer %s, the deletion completes\n", f.Service, released, paasv1.OriginalServiceFinalizer)
				continue
			}
			fmt.Fprintf(out, "  Service %s: removes finalizer %s\n", f.Service, paasv1.OriginalServiceFinalizer)
		}
		for _, o := range p.Orphans {
			fmt.Fprintf(out, "  ledger IP %s: deleted, the address is free again (%s)\n", o.IP, o.Why)
		}
	}
	fmt.Fprintf(out, "addresses: %d LoadBalancer Services keep theirs", p.Keep)
	if len(p.Problems) > 0 {
		fmt.Fprintf(out, "; see the problems below")
	}
	fmt.Fprintln(out)
	if len(p.VirtualIPs) > 0 {
		fmt.Fprintf(out, "VirtualIPs still to migrate (vip-allocator migrate all, or annotate each with %s): %s\n",
			paasv1.MigrateAnnotation, strings.Join(p.VirtualIPs, ", "))
	}
	if len(p.Problems) > 0 {
		fmt.Fprintln(out, "problems:")
		for _, pr := range p.Problems {
			fmt.Fprintf(out, "  %s\n", pr)
		}
	}
}

// PlanUpgradeOf reads the cluster and prints what the upgrade will do.
func PlanUpgradeOf(ctx context.Context, c client.Reader, namespace string, ownClassOnly bool, out io.Writer) (UpgradePlan, error) {
	in, err := ObserveInstallation(ctx, c, namespace, ownClassOnly)
	if err != nil {
		return UpgradePlan{}, err
	}
	p := PlanUpgrade(in)
	p.Write(out, namespace)
	return p, nil
}

// Upgrade removes what the original operator left that would race or block
// ours, then reads the cluster again and says what is left: the operator's
// part (adoption, finalizers), VirtualIPs, problems. Running it again removes
// nothing more.
func Upgrade(ctx context.Context, c client.Client, namespace string, ownClassOnly bool, out io.Writer) error {
	in, err := ObserveInstallation(ctx, c, namespace, ownClassOnly)
	if err != nil {
		return err
	}
	if err := ApplyUpgrade(ctx, c, PlanUpgrade(in), out); err != nil {
		return fmt.Errorf("remove the original operator's objects: %w", err)
	}
	if in, err = ObserveInstallation(ctx, c, namespace, ownClassOnly); err != nil {
		return err
	}
	p := PlanUpgrade(in)
	if len(p.Remove) > 0 {
		return fmt.Errorf("%s is back after its deletion: something recreates it", p.Remove[0].Object)
	}
	fmt.Fprintln(out)
	p.Write(out, namespace)
	return nil
}
