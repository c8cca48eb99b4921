package migration

import (
	"cmp"
	"fmt"
	"net/netip"
	"slices"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
)

// Upgrading the original paas.org operator (0.3 or 1.0) in place. After
// "kubectl apply --server-side -f deploy/bundle.yaml" its pieces are still
// there: a Deployment that would race our operator, a webhook that refuses
// every ledger write once no pod answers it, a cluster-admin binding. This file
// decides, from one snapshot of the cluster (Installation), what
// "vip-allocator migrate upgrade" removes and what the operator will adopt;
// upgrade_apply.go reads the snapshot and performs the removals.

// Installation is what the upgrade reads: the original's objects and the
// allocation state the operator will adopt.
type Installation struct {
	// Namespace the operator (and the original) is installed in.
	Namespace string
	// OwnClassOnly is the operator's flag: whether it serves class-less Services.
	OwnClassOnly        bool
	Deployments         []appsv1.Deployment // every namespace
	ValidatingWebhooks  []admissionregistrationv1.ValidatingWebhookConfiguration
	MutatingWebhooks    []admissionregistrationv1.MutatingWebhookConfiguration
	ClusterRoleBindings []rbacv1.ClusterRoleBinding
	RoleBindings        []rbacv1.RoleBinding // in Namespace
	ServiceAccounts     []corev1.ServiceAccount
	Services            []corev1.Service // every namespace
	Ledger              []paasv1.IP
	Groups              []paasv1.IPGroup
	VirtualIPs          []paasv1.VirtualIP
}

// Object names a Kubernetes object for the plan and for the removal.
type Object struct {
	Kind      string // Deployment, ValidatingWebhookConfiguration, ...
	Namespace string
	Name      string
	UID       types.UID // the removal deletes exactly what the plan saw
}

func (o Object) String() string {
	if o.Namespace == "" {
		return o.Kind + " " + o.Name
	}
	return o.Kind + " " + o.Namespace + "/" + o.Name
}

// Removal is one object "migrate upgrade" deletes, and why.
type Removal struct {
	Object
	Why string
}

// Adoption is a ledger object of the original that the operator will give its
// Service as owner, in place.
type Adoption struct {
	IP      string // ledger object name
	Address string
	Service types.NamespacedName
}

// Finalizer is a Service carrying the original's finalizer, which the operator removes.
type Finalizer struct {
	Service types.NamespacedName
	// Deleting Services finish deleting; Release is what they free.
	Deleting bool
	Release  []string
}

// Orphan is a ledger object of the original whose Service is gone (or shows
// another address): the operator deletes it, and the address is free again.
type Orphan struct {
	IP  string
	Why string
}

// UpgradePlan is what the upgrade of the original's installation will do.
type UpgradePlan struct {
	Remove     []Removal   // by "migrate upgrade" (the operator may not)
	Adopt      []Adoption  // by the operator
	Finalizers []Finalizer // removed by the operator
	Orphans    []Orphan    // deleted by the operator
	// Keep counts the Services whose address the operator keeps as it is.
	Keep int
	// VirtualIPs still to migrate ("migrate all", or the annotation one by one).
	VirtualIPs []string
	// Problems are what would go wrong, each with its cause and the fix.
	Problems []string
}

// Done reports whether nothing of the original is left to remove or adopt.
func (p UpgradePlan) Done() bool {
	return len(p.Remove) == 0 && len(p.Adopt) == 0 && len(p.Finalizers) == 0 && len(p.Orphans) == 0
}

// PlanUpgrade decides the upgrade of in. It is pure: in is one snapshot.
func PlanUpgrade(in Installation) UpgradePlan {
	var p UpgradePlan
	p.Remove = append(p.Remove, originalDeployments(in)...)
	webhooks, problems := originalWebhooks(in)
	p.Remove = append(p.Remove, webhooks...)
	p.Problems = append(p.Problems, problems...)
	p.Remove = append(p.Remove, originalGrants(in)...)
	planLedger(in, &p)
	for _, vip := range in.VirtualIPs {
		if !vip.Migrated() {
			p.VirtualIPs = append(p.VirtualIPs, vip.Namespace+"/"+vip.Name)
		}
	}
	slices.Sort(p.VirtualIPs)
	return p
}

// originalDeployments: every Deployment running the original's image races our
// operator for the same Services and ledger.
func originalDeployments(in Installation) []Removal {
	var out []Removal
	for _, d := range in.Deployments {
		for _, c := range d.Spec.Template.Spec.Containers {
			if paasv1.IsOriginalImage(c.Image) {
				out = append(out, Removal{Object{"Deployment", d.Namespace, d.Name, d.UID},
					fmt.Sprintf("runs the original operator (%s), which would race this one for every Service and ledger object", c.Image)})
				break
			}
		}
	}
	return out
}

// originalWebhooks: webhook configurations whose webhooks intercept paas.org
// objects through a Service in the operator's namespace. This operator runs no
// webhook, so they are the original's; with failurePolicy Fail and no pod they
// refuse every write they intercept. A configuration that also holds other
// webhooks is not ours to delete: a problem for a person.
func originalWebhooks(in Installation) (remove []Removal, problems []string) {
	type hook struct {
		name, ns  string
		resources []string // the paas.org resources it intercepts
	}
	judge := func(kind, name string, uid types.UID, hooks []hook) {
		var ours, intercepted, others []string
		for _, h := range hooks {
			if len(h.resources) > 0 && h.ns == in.Namespace {
				ours = append(ours, h.name)
				intercepted = append(intercepted, h.resources...)
			} else {
				others = append(others, h.name)
			}
		}
		slices.Sort(intercepted)
		switch {
		case len(ours) == 0:
		case len(others) == 0:
			remove = append(remove, Removal{Object{kind, "", name, uid},
				fmt.Sprintf("the original's webhook %s has no pod behind it: every write of paas.org %s it intercepts fails",
					strings.Join(ours, ", "), strings.Join(slices.Compact(intercepted), ", "))})
		default:
			problems = append(problems, fmt.Sprintf("%s %s holds the original's webhook %s and others (%s): migrate upgrade leaves it; remove %s from it by hand, or every ledger write fails",
				kind, name, strings.Join(ours, ", "), strings.Join(others, ", "), strings.Join(ours, ", ")))
		}
	}
	for _, c := range in.ValidatingWebhooks {
		var hooks []hook
		for _, w := range c.Webhooks {
			hooks = append(hooks, hook{name: w.Name, ns: webhookNamespace(w.ClientConfig), resources: paasResources(w.Rules)})
		}
		judge("ValidatingWebhookConfiguration", c.Name, c.UID, hooks)
	}
	for _, c := range in.MutatingWebhooks {
		var hooks []hook
		for _, w := range c.Webhooks {
			hooks = append(hooks, hook{name: w.Name, ns: webhookNamespace(w.ClientConfig), resources: paasResources(w.Rules)})
		}
		judge("MutatingWebhookConfiguration", c.Name, c.UID, hooks)
	}
	return remove, problems
}

func webhookNamespace(c admissionregistrationv1.WebhookClientConfig) string {
	if c.Service == nil {
		return ""
	}
	return c.Service.Namespace
}

// paasResources lists the paas.org resources rules intercept ("*" for all).
func paasResources(rules []admissionregistrationv1.RuleWithOperations) []string {
	var out []string
	for _, r := range rules {
		if slices.Contains(r.APIGroups, paasv1.GroupVersion.Group) || slices.Contains(r.APIGroups, "*") {
			out = append(out, r.Resources...)
		}
	}
	return out
}

// originalGrants: a ServiceAccount of the namespace bound to cluster-admin (the
// original 0.3 bound its own so) gives every pod of the namespace the cluster;
// the original's ServiceAccount and its bindings give a pod that uses it the
// right to rewrite any Service and the ledger.
func originalGrants(in Installation) []Removal {
	var out []Removal
	isOriginalSA := func(s rbacv1.Subject) bool {
		return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == in.Namespace && s.Name == paasv1.OriginalServiceAccount
	}
	for _, b := range in.ClusterRoleBindings {
		namespaceSA := slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == in.Namespace
		})
		switch {
		case b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "cluster-admin" && namespaceSA:
			out = append(out, Removal{Object{"ClusterRoleBinding", "", b.Name, b.UID},
				fmt.Sprintf("binds %s to cluster-admin: every pod of namespace %s could do anything", subjectNames(b.Subjects), in.Namespace)})
		case len(b.Subjects) > 0 && !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return !isOriginalSA(s) }):
			out = append(out, Removal{Object{"ClusterRoleBinding", "", b.Name, b.UID},
				fmt.Sprintf("grants ClusterRole %s to the original's ServiceAccount", b.RoleRef.Name)})
		}
	}
	for _, b := range in.RoleBindings {
		if len(b.Subjects) > 0 && !slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool { return !isOriginalSA(s) }) {
			out = append(out, Removal{Object{"RoleBinding", b.Namespace, b.Name, b.UID},
				fmt.Sprintf("grants %s %s to the original's ServiceAccount", b.RoleRef.Kind, b.RoleRef.Name)})
		}
	}
	for _, sa := range in.ServiceAccounts {
		if sa.Namespace == in.Namespace && sa.Name == paasv1.OriginalServiceAccount {
			out = append(out, Removal{Object{"ServiceAccount", sa.Namespace, sa.Name, sa.UID}, "the original operator's identity"})
		}
	}
	return out
}

func subjectNames(subjects []rbacv1.Subject) string {
	var out []string
	for _, s := range subjects {
		out = append(out, s.Kind+" "+strings.TrimPrefix(s.Namespace+"/", "/")+s.Name)
	}
	return strings.Join(out, ", ")
}

// planLedger decides, as the operator will, what happens to each Service the
// original served and to each ledger object it wrote.
func planLedger(in Installation, p *UpgradePlan) {
	// Oldest first, as the operator's rebuild imports them: the older Service
	// keeps an address two statuses show.
	byAge := slices.Clone(in.Services)
	slices.SortStableFunc(byAge, func(x, y corev1.Service) int { return x.CreationTimestamp.Compare(y.CreationTimestamp.Time) })
	services := map[types.NamespacedName]*corev1.Service{}
	shownBy := map[netip.Addr][]types.NamespacedName{} // address -> Services whose status shows it
	for i := range byAge {
		svc := &byAge[i]
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		services[key] = svc
		if !svc.DeletionTimestamp.IsZero() || !lbclass.Handles(svc, in.OwnClassOnly) {
			continue
		}
		for _, addr := range k8salloc.IngressAddrs(svc) {
			shownBy[addr] = append(shownBy[addr], key)
		}
	}
	ledgerOf := map[types.NamespacedName][]string{}
	for i := range in.Ledger {
		ip := &in.Ledger[i]
		owner, ok := paasv1.OriginalServiceOwner(ip)
		if !ok {
			continue
		}
		addr, _ := ip.Addr()
		ledgerOf[owner] = append(ledgerOf[owner], addr.String())
		svc := services[owner]
		switch {
		case svc == nil:
			p.Orphans = append(p.Orphans, Orphan{ip.Name, fmt.Sprintf("Service %s no longer exists", owner)})
		case !svc.DeletionTimestamp.IsZero():
			// Released with the Service, below.
		case !lbclass.Handles(svc, in.OwnClassOnly):
			p.Orphans = append(p.Orphans, Orphan{ip.Name, fmt.Sprintf("Service %s is not a LoadBalancer this operator serves", owner)})
		case len(k8salloc.IngressAddrs(svc)) > 0 && !slices.Contains(k8salloc.IngressAddrs(svc), addr):
			p.Orphans = append(p.Orphans, Orphan{ip.Name, fmt.Sprintf("Service %s shows %s instead", owner, joinAddrs(k8salloc.IngressAddrs(svc)))})
		default:
			p.Adopt = append(p.Adopt, Adoption{IP: ip.Name, Address: addr.String(), Service: owner})
		}
	}
	for i := range in.Services {
		svc := &in.Services[i]
		key := types.NamespacedName{Namespace: svc.Namespace, Name: svc.Name}
		if slices.Contains(svc.Finalizers, paasv1.OriginalServiceFinalizer) {
			f := Finalizer{Service: key, Deleting: !svc.DeletionTimestamp.IsZero()}
			if f.Deleting {
				f.Release = ledgerOf[key]
			}
			p.Finalizers = append(p.Finalizers, f)
		}
		if !svc.DeletionTimestamp.IsZero() || !lbclass.Handles(svc, in.OwnClassOnly) {
			continue
		}
		addrs := k8salloc.IngressAddrs(svc)
		if len(addrs) == 0 {
			continue
		}
		kept := true
		for _, addr := range addrs {
			if others := shownBy[addr]; len(others) > 1 && others[0] != key {
				kept = false
				p.Problems = append(p.Problems, fmt.Sprintf("Service %s shows %s, which Service %s shows too: the older keeps it and %s gets another address; give one of them another spec.loadBalancerIP",
					key, addr, others[0], key))
			} else if why := notAllowed(in.Groups, addr); why != "" {
				kept = false
				p.Problems = append(p.Problems, fmt.Sprintf("Service %s holds %s, which %s: the operator would move it to a free address; add an IPGroup that covers %s, or fix the one that should",
					key, addr, why, addr))
			}
		}
		if kept {
			p.Keep++
		}
	}
	slices.SortFunc(p.Adopt, func(a, b Adoption) int { return cmp.Compare(a.IP, b.IP) })
	slices.SortFunc(p.Orphans, func(a, b Orphan) int { return cmp.Compare(a.IP, b.IP) })
	slices.SortFunc(p.Finalizers, func(a, b Finalizer) int { return cmp.Compare(a.Service.String(), b.Service.String()) })
}

// notAllowed says why no IPGroup may hand out addr, or "" when one may. It
// reads the groups as the allocator does (k8salloc.Group); an IPGroup that does
// not parse hands out nothing, as in the operator.
func notAllowed(groups []paasv1.IPGroup, addr netip.Addr) string {
	var excludedIn []string
	for i := range groups {
		g, err := k8salloc.Group(&groups[i])
		if err != nil || !g.Contains(addr) {
			continue
		}
		if g.Usable(addr) {
			return ""
		}
		excludedIn = append(excludedIn, g.Name)
	}
	if len(excludedIn) > 0 {
		return "IPGroup " + strings.Join(excludedIn, ", ") + " excludes"
	}
	return "no IPGroup's segment contains"
}

func joinAddrs(addrs []netip.Addr) string {
	var s []string
	for _, a := range addrs {
		s = append(s, a.String())
	}
	return strings.Join(s, ", ")
}
