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
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
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

// Removal is one object and why: one "migrate upgrade" deletes, or, in
// UpgradePlan.Untouched, one it leaves.
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
	Remove []Removal // by "migrate upgrade" (the operator may not)
	// Untouched are objects that resemble the original's but are not what its
	// bundle installs: neither "migrate upgrade" nor the operator touches them.
	Untouched  []Removal
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
	p.add(originalDeployments(in))
	p.add(originalWebhooks(in))
	p.add(originalClusterBindings(in))
	p.add(originalRoleBindings(in))
	for _, sa := range in.ServiceAccounts {
		if sa.Namespace == in.Namespace && sa.Name == paasv1.OriginalServiceAccount {
			p.Remove = append(p.Remove, Removal{Object{"ServiceAccount", sa.Namespace, sa.Name, sa.UID}, "the original operator's identity"})
		}
	}
	planLedger(in, &p)
	for _, vip := range in.VirtualIPs {
		if !vip.Migrated() {
			p.VirtualIPs = append(p.VirtualIPs, vip.Namespace+"/"+vip.Name)
		}
	}
	slices.Sort(p.VirtualIPs)
	return p
}

// reach is what one kind's judge decided: the original's objects to remove,
// the look-alikes it leaves, and what needs a person.
type reach struct {
	remove    []Removal
	untouched []Removal
	problems  []string
}

func (p *UpgradePlan) add(r reach) {
	p.Remove = append(p.Remove, r.remove...)
	p.Untouched = append(p.Untouched, r.untouched...)
	p.Problems = append(p.Problems, r.problems...)
}

// originalDeployments: the original's Deployment races our operator for the
// same Services and ledger. It is the one its bundle installs, by name in the
// operator's namespace, running the original's image; a Deployment running
// that image anywhere else is someone's copy, named in the plan and left.
func originalDeployments(in Installation) (r reach) {
	for _, d := range in.Deployments {
		image := ""
		for _, c := range d.Spec.Template.Spec.Containers {
			if paasv1.IsOriginalImage(c.Image) {
				image = c.Image
				break
			}
		}
		if image == "" {
			continue
		}
		obj := Object{"Deployment", d.Namespace, d.Name, d.UID}
		if d.Namespace == in.Namespace && d.Name == paasv1.OriginalDeployment {
			r.remove = append(r.remove, Removal{obj,
				fmt.Sprintf("runs the original operator (%s), which would race this one for every Service and ledger object", image)})
			continue
		}
		r.untouched = append(r.untouched, Removal{obj,
			fmt.Sprintf("runs the original's image %s but is not its Deployment %s/%s; if it serves LoadBalancer Services it races this operator: scale it down by hand",
				image, in.Namespace, paasv1.OriginalDeployment)})
	}
	return r
}

// webhookHook is one webhook of a configuration, as the upgrade judges it.
type webhookHook struct {
	name      string
	service   types.NamespacedName // the Service it calls; empty for a URL
	resources []string             // the paas.org resources it intercepts
}

// originalWebhooks: the original's ValidatingWebhookConfiguration, by name,
// whose webhooks all call the original's webhook Service. This operator runs
// no webhook: with failurePolicy Fail and no pod behind them they refuse every
// write they intercept. If the configuration also holds other webhooks it is
// not ours to delete: a problem for a person. Any other configuration that
// intercepts paas.org objects through a Service of the namespace is left and
// named.
func originalWebhooks(in Installation) (r reach) {
	originalService := types.NamespacedName{Namespace: in.Namespace, Name: paasv1.OriginalWebhookService}
	judge := func(kind, name string, uid types.UID, hooks []webhookHook) {
		obj := Object{kind, "", name, uid}
		var ours, intercepted, others []string
		for _, h := range hooks {
			if h.service == originalService && len(h.resources) > 0 {
				ours = append(ours, h.name)
				intercepted = append(intercepted, h.resources...)
			} else {
				others = append(others, h.name)
			}
		}
		slices.Sort(intercepted)
		isOriginal := kind == "ValidatingWebhookConfiguration" && name == paasv1.OriginalWebhookConfiguration
		switch {
		case isOriginal && len(ours) > 0 && len(others) == 0:
			r.remove = append(r.remove, Removal{obj,
				fmt.Sprintf("the original's webhook %s has no pod behind it: every write of paas.org %s it intercepts fails",
					strings.Join(ours, ", "), strings.Join(slices.Compact(intercepted), ", "))})
		case isOriginal && len(ours) > 0:
			r.problems = append(r.problems, fmt.Sprintf("%s holds the original's webhook %s and others (%s): migrate upgrade leaves it; remove %s from it by hand, or every ledger write fails",
				obj, strings.Join(ours, ", "), strings.Join(others, ", "), strings.Join(ours, ", ")))
		case isOriginal:
			r.untouched = append(r.untouched, Removal{obj, fmt.Sprintf("has the original's name, but none of its webhooks calls Service %s for paas.org objects", originalService)})
		default:
			if why := interceptsFromNamespace(hooks, in.Namespace); why != "" {
				r.untouched = append(r.untouched, Removal{obj, why + fmt.Sprintf(", but is not the original's %s; if nothing answers it, the writes it intercepts fail: remove it by hand", paasv1.OriginalWebhookConfiguration)})
			}
		}
	}
	for _, c := range in.ValidatingWebhooks {
		var hooks []webhookHook
		for _, w := range c.Webhooks {
			hooks = append(hooks, webhookHook{w.Name, webhookService(w.ClientConfig), paasResources(w.Rules)})
		}
		judge("ValidatingWebhookConfiguration", c.Name, c.UID, hooks)
	}
	for _, c := range in.MutatingWebhooks {
		var hooks []webhookHook
		for _, w := range c.Webhooks {
			hooks = append(hooks, webhookHook{w.Name, webhookService(w.ClientConfig), paasResources(w.Rules)})
		}
		judge("MutatingWebhookConfiguration", c.Name, c.UID, hooks)
	}
	return r
}

// interceptsFromNamespace says which of hooks intercept paas.org objects
// through a Service of namespace, or "" if none does.
func interceptsFromNamespace(hooks []webhookHook, namespace string) string {
	var names, resources []string
	for _, h := range hooks {
		if h.service.Namespace == namespace && len(h.resources) > 0 {
			names = append(names, fmt.Sprintf("%s (Service %s)", h.name, h.service))
			resources = append(resources, h.resources...)
		}
	}
	if len(names) == 0 {
		return ""
	}
	slices.Sort(resources)
	return fmt.Sprintf("its webhook %s intercepts paas.org %s", strings.Join(names, ", "), strings.Join(slices.Compact(resources), ", "))
}

func webhookService(c admissionregistrationv1.WebhookClientConfig) types.NamespacedName {
	if c.Service == nil {
		return types.NamespacedName{}
	}
	return types.NamespacedName{Namespace: c.Service.Namespace, Name: c.Service.Name}
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

// originalBinding is a binding the original's bundle installs: its name, the
// role it binds, and as its only subject the original's ServiceAccount.
type originalBinding struct {
	name, roleKind, role, why string
}

var clusterBindingsOfOriginal = []originalBinding{
	{paasv1.OriginalManagerBinding, "ClusterRole", paasv1.OriginalManagerRole, "grants ClusterRole " + paasv1.OriginalManagerRole + " to the original's ServiceAccount"},
	{paasv1.OriginalClusterAdminBinding, "ClusterRole", "cluster-admin", "binds the original's ServiceAccount to cluster-admin: a pod using it could do anything"},
}

// judgeBinding decides one binding: the original's (by name, role and its
// ServiceAccount as the only subject) is removed; one with the original's name
// but other content, or that binds the original's ServiceAccount under another
// name, is left and named. ok is false for bindings of no concern.
func judgeBinding(in Installation, obj Object, ref rbacv1.RoleRef, subjects []rbacv1.Subject, originals []originalBinding) (Removal, bool, bool) {
	originalSA := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Namespace: in.Namespace, Name: paasv1.OriginalServiceAccount}
	onlyOriginalSA := len(subjects) == 1 && subjects[0].Kind == originalSA.Kind && subjects[0].Namespace == originalSA.Namespace && subjects[0].Name == originalSA.Name
	for _, o := range originals {
		if obj.Name != o.name {
			continue
		}
		if ref.Kind == o.roleKind && ref.Name == o.role && onlyOriginalSA {
			return Removal{obj, o.why}, true, true
		}
		return Removal{obj, fmt.Sprintf("has the name of the original's binding, but binds %s to %s %s, not ServiceAccount %s/%s to %s %s",
			subjectNames(subjects), ref.Kind, ref.Name, in.Namespace, paasv1.OriginalServiceAccount, o.roleKind, o.role)}, false, true
	}
	if slices.ContainsFunc(subjects, func(s rbacv1.Subject) bool {
		return s.Kind == originalSA.Kind && s.Namespace == originalSA.Namespace && s.Name == originalSA.Name
	}) {
		return Removal{obj, fmt.Sprintf("binds %s to %s %s, but is not a binding the original's bundle installs; once the ServiceAccount is deleted it grants it nothing", subjectNames(subjects), ref.Kind, ref.Name)}, false, true
	}
	return Removal{}, false, false
}

// originalClusterBindings: the original's ClusterRoleBindings. A cluster-admin
// binding of another ServiceAccount of the namespace is not the original's: it
// is named, for a person to judge.
func originalClusterBindings(in Installation) (r reach) {
	for _, b := range in.ClusterRoleBindings {
		obj := Object{"ClusterRoleBinding", "", b.Name, b.UID}
		if rm, remove, concern := judgeBinding(in, obj, b.RoleRef, b.Subjects, clusterBindingsOfOriginal); concern {
			if remove {
				r.remove = append(r.remove, rm)
			} else {
				r.untouched = append(r.untouched, rm)
			}
			continue
		}
		namespaceSA := slices.ContainsFunc(b.Subjects, func(s rbacv1.Subject) bool {
			return s.Kind == rbacv1.ServiceAccountKind && s.Namespace == in.Namespace
		})
		if b.RoleRef.Kind == "ClusterRole" && b.RoleRef.Name == "cluster-admin" && namespaceSA {
			r.untouched = append(r.untouched, Removal{obj,
				fmt.Sprintf("binds %s to cluster-admin, but is not the original's binding: a pod running as it can do anything; remove it by hand if nothing needs it", subjectNames(b.Subjects))})
		}
	}
	return r
}

// originalRoleBindings: the original's leader-election RoleBinding in the namespace.
func originalRoleBindings(in Installation) (r reach) {
	originals := []originalBinding{{paasv1.OriginalLeaderElectionBinding, "Role", paasv1.OriginalLeaderElectionRole,
		"grants Role " + paasv1.OriginalLeaderElectionRole + " to the original's ServiceAccount"}}
	for _, b := range in.RoleBindings {
		if b.Namespace != in.Namespace {
			continue
		}
		obj := Object{"RoleBinding", b.Namespace, b.Name, b.UID}
		if rm, remove, concern := judgeBinding(in, obj, b.RoleRef, b.Subjects, originals); remove {
			r.remove = append(r.remove, rm)
		} else if concern {
			r.untouched = append(r.untouched, rm)
		}
	}
	return r
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
		owner, ok := ledger.OriginalOwner(ip)
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
			p.Orphans = append(p.Orphans, Orphan{ip.Name, fmt.Sprintf("Service %s shows %s instead", owner, ingress.Join(k8salloc.IngressAddrs(svc)))})
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
