package migration

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// originalBundle reads the original operator's released deploy/bundle.yaml
// (../shared/fixtures/original-operator beside the repository) into an
// Installation, as "kubectl apply -f" of it leaves the cluster.
func originalBundle(t *testing.T, release string) Installation {
	t.Helper()
	_, file, _, _ := runtime.Caller(0)
	path := filepath.Join(filepath.Dir(file), "..", "..", "shared", "fixtures", "original-operator", release+"-bundle.yaml")
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("the original's bundle is read from beside the repository: %v", err)
	}
	in := Installation{Namespace: paasv1.OriginalNamespace}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	for {
		u := &unstructured.Unstructured{}
		if err := dec.Decode(&u.Object); err != nil {
			if errors.Is(err, io.EOF) {
				return in
			}
			t.Fatal(err)
		}
		u.SetUID(types.UID("uid-" + u.GetName()))
		into := func(obj any) {
			if err := k8sruntime.DefaultUnstructuredConverter.FromUnstructured(u.Object, obj); err != nil {
				t.Fatal(err)
			}
		}
		switch u.GetKind() {
		case "Deployment":
			var d appsv1.Deployment
			into(&d)
			in.Deployments = append(in.Deployments, d)
		case "ValidatingWebhookConfiguration":
			var v admissionregistrationv1.ValidatingWebhookConfiguration
			into(&v)
			in.ValidatingWebhooks = append(in.ValidatingWebhooks, v)
		case "ClusterRoleBinding":
			var b rbacv1.ClusterRoleBinding
			into(&b)
			in.ClusterRoleBindings = append(in.ClusterRoleBindings, b)
		case "RoleBinding":
			var b rbacv1.RoleBinding
			into(&b)
			in.RoleBindings = append(in.RoleBindings, b)
		case "ServiceAccount":
			var sa corev1.ServiceAccount
			into(&sa)
			in.ServiceAccounts = append(in.ServiceAccounts, sa)
		}
	}
}

// ourInstallation adds what our bundle installs beside it: none of it may be removed.
func ourInstallation(in Installation) Installation {
	in.Deployments = append(in.Deployments, appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: "vip-allocator-operator"},
		Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{Containers: []corev1.Container{{Image: "ghcr.io/paas-org/vip-allocator-operator:1.2"}}}}}})
	ours := []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: in.Namespace, Name: "vip-allocator-operator"}}
	in.ClusterRoleBindings = append(in.ClusterRoleBindings, rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "vip-allocator-operator"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "vip-allocator-operator"}, Subjects: ours})
	in.RoleBindings = append(in.RoleBindings, rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: "vip-allocator-operator"},
		RoleRef: rbacv1.RoleRef{Kind: "Role", Name: "vip-allocator-operator"}, Subjects: ours})
	in.ServiceAccounts = append(in.ServiceAccounts, corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: in.Namespace, Name: "vip-allocator-operator"}})
	return in
}

func TestPlanUpgradeRemovesTheOriginalsPieces(t *testing.T) {
	common := []string{
		"Deployment vip-allocator-operator/vip-allocator-operator-controller-manager",
		"ValidatingWebhookConfiguration vip-allocator-operator-validating-webhook-configuration",
		"ClusterRoleBinding vip-allocator-operator-manager-role-binding",
		"RoleBinding vip-allocator-operator/vip-allocator-operator-leader-election-rolebinding",
		"ServiceAccount vip-allocator-operator/vip-allocator-operator-sa",
	}
	for _, c := range []struct {
		release string
		want    []string
	}{
		{"1.0", common},
		{"0.3", append(slices.Clone(common), "ClusterRoleBinding vip-allocator-operator-manager-rolebinding")}, // to cluster-admin
	} {
		p := PlanUpgrade(ourInstallation(originalBundle(t, c.release)))
		var got []string
		for _, r := range p.Remove {
			got = append(got, r.String())
			if r.UID != types.UID("uid-"+r.Name) {
				t.Errorf("%s: %s removed without the uid it was seen with", c.release, r.Object)
			}
		}
		slices.Sort(got)
		want := slices.Sorted(slices.Values(c.want))
		if !slices.Equal(got, want) {
			t.Errorf("%s: removes\n  %s\nwant\n  %s", c.release, strings.Join(got, "\n  "), strings.Join(want, "\n  "))
		}
		if len(p.Problems) > 0 {
			t.Errorf("%s: problems %v", c.release, p.Problems)
		}
	}
}

// decoys adds objects that resemble the original's, none of which its bundle
// installs: the upgrade must leave every one and name it.
func decoys(in Installation) (Installation, []string) {
	ns := in.Namespace
	svcIn := func(ns, name string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: ns, Name: name}}
	}
	everything := []admissionregistrationv1.RuleWithOperations{{Rule: admissionregistrationv1.Rule{APIGroups: []string{"*"}, Resources: []string{"*"}}}}
	paasRule := []admissionregistrationv1.RuleWithOperations{{Rule: admissionregistrationv1.Rule{APIGroups: []string{"paas.org"}, Resources: []string{"ips"}}}}
	in.ValidatingWebhooks = append(in.ValidatingWebhooks,
		admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "policy", UID: "uid-policy"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "policy.example.com", Rules: everything, ClientConfig: svcIn(ns, "policy")}}},
		admissionregistrationv1.ValidatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "audit"}, Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "audit.example.com", Rules: paasRule, ClientConfig: svcIn("audit", "audit")}}}, // served from elsewhere: of no concern
	)
	in.MutatingWebhooks = append(in.MutatingWebhooks, admissionregistrationv1.MutatingWebhookConfiguration{ObjectMeta: metav1.ObjectMeta{Name: "renamed"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{Name: "mip.kb.io", Rules: paasRule, ClientConfig: svcIn(ns, paasv1.OriginalWebhookService)}}})
	sa := func(name string) []rbacv1.Subject {
		return []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: name}}
	}
	clusterAdmin := rbacv1.RoleRef{Kind: "ClusterRole", Name: "cluster-admin"}
	in.ClusterRoleBindings = append(in.ClusterRoleBindings,
		rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admin-for-default-sa"}, RoleRef: clusterAdmin, Subjects: sa("default")},
		rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "extra-grant"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: sa(paasv1.OriginalServiceAccount)},
		rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "admins"}, RoleRef: clusterAdmin, Subjects: []rbacv1.Subject{{Kind: "Group", Name: "platform-admins"}}},
		rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewer"}, RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "view"}, Subjects: sa("default")},
	)
	in.RoleBindings = append(in.RoleBindings, rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "debug"},
		RoleRef: rbacv1.RoleRef{Kind: "ClusterRole", Name: "edit"}, Subjects: sa(paasv1.OriginalServiceAccount)})
	original := corev1.PodSpec{Containers: []corev1.Container{{Image: "docker.io/paasteam324/vip-allocator-operator:1.0"}}}
	in.Deployments = append(in.Deployments,
		appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "lab", Name: paasv1.OriginalDeployment}, Spec: appsv1.DeploymentSpec{Template: corev1.PodTemplateSpec{Spec: original}}})
	return in, []string{
		"ClusterRoleBinding admin-for-default-sa",
		"ClusterRoleBinding extra-grant",
		"Deployment lab/vip-allocator-operator-controller-manager",
		"MutatingWebhookConfiguration renamed",
		"RoleBinding vip-allocator-operator/debug",
		"ValidatingWebhookConfiguration policy",
	}
}

func TestPlanUpgradeLeavesWhatOnlyResemblesTheOriginal(t *testing.T) {
	in, want := decoys(ourInstallation(originalBundle(t, "0.3")))
	p := PlanUpgrade(in)
	if len(p.Remove) != 6 {
		t.Errorf("removes %d objects, want the original's 6: %v", len(p.Remove), p.Remove)
	}
	var got []string
	for _, u := range p.Untouched {
		got = append(got, u.String())
	}
	slices.Sort(got)
	if !slices.Equal(got, want) {
		t.Errorf("not touched\n  %s\nwant\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	var out bytes.Buffer
	p.Write(&out, in.Namespace)
	for _, line := range []string{
		"not touched (they resemble the original's objects, but are not what its bundle installs):",
		"  ClusterRoleBinding admin-for-default-sa: binds ServiceAccount vip-allocator-operator/default to cluster-admin, but is not the original's binding",
		"  Deployment lab/vip-allocator-operator-controller-manager: runs the original's image docker.io/paasteam324/vip-allocator-operator:1.0 but is not its Deployment vip-allocator-operator/vip-allocator-operator-controller-manager",
		"  ValidatingWebhookConfiguration policy: its webhook policy.example.com (Service vip-allocator-operator/policy) intercepts paas.org *, but is not the original's",
	} {
		if !strings.Contains(out.String(), line) {
			t.Errorf("the plan does not say %q:\n%s", line, out.String())
		}
	}
}

// An object with the original's name but other content is not the original's.
func TestPlanUpgradeWantsTheOriginalsContent(t *testing.T) {
	in := ourInstallation(originalBundle(t, "0.3"))
	for i := range in.ClusterRoleBindings {
		if b := &in.ClusterRoleBindings[i]; b.Name == paasv1.OriginalClusterAdminBinding {
			b.Subjects = append(b.Subjects, rbacv1.Subject{Kind: "ServiceAccount", Namespace: in.Namespace, Name: "default"})
		}
	}
	hooks := in.ValidatingWebhooks[0].Webhooks
	hooks[0].ClientConfig.Service.Name = "policy"
	hooks[1].ClientConfig.Service.Name = "policy"
	in.Deployments[0].Spec.Template.Spec.Containers = in.Deployments[0].Spec.Template.Spec.Containers[:1] // kube-rbac-proxy only
	p := PlanUpgrade(in)
	for _, r := range p.Remove {
		if r.Name == paasv1.OriginalClusterAdminBinding || r.Name == paasv1.OriginalWebhookConfiguration || r.Name == paasv1.OriginalDeployment {
			t.Errorf("removes %s, which is not as the original installs it", r.Object)
		}
	}
	var untouched []string
	for _, u := range p.Untouched {
		untouched = append(untouched, u.String()+": "+u.Why)
	}
	for _, want := range []string{
		"ClusterRoleBinding vip-allocator-operator-manager-rolebinding: has the name of the original's binding, but binds ServiceAccount vip-allocator-operator/vip-allocator-operator-sa, ServiceAccount vip-allocator-operator/default to ClusterRole cluster-admin",
		"ValidatingWebhookConfiguration vip-allocator-operator-validating-webhook-configuration: has the original's name, but none of its webhooks calls Service vip-allocator-operator/vip-allocator-operator-webhook",
	} {
		if !slices.ContainsFunc(untouched, func(u string) bool { return strings.HasPrefix(u, want) }) {
			t.Errorf("not named %q among\n  %s", want, strings.Join(untouched, "\n  "))
		}
	}
}

// The original's configuration holding someone else's webhook too is a problem for a person.
func TestPlanUpgradeMixedWebhookConfiguration(t *testing.T) {
	in := ourInstallation(originalBundle(t, "1.0"))
	other := admissionregistrationv1.ValidatingWebhook{Name: "policy.example.com",
		ClientConfig: admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{Namespace: "policy", Name: "webhook"}}}
	in.ValidatingWebhooks[0].Webhooks = append(in.ValidatingWebhooks[0].Webhooks, other)
	p := PlanUpgrade(in)
	for _, r := range p.Remove {
		if r.Kind == "ValidatingWebhookConfiguration" {
			t.Errorf("removes %s, which holds another webhook", r.Object)
		}
	}
	if len(p.Problems) != 1 || !strings.Contains(p.Problems[0], "ValidatingWebhookConfiguration vip-allocator-operator-validating-webhook-configuration holds the original's webhook vip.kb.io and others (policy.example.com)") {
		t.Errorf("the mixed configuration must be named as a problem: %q", p.Problems)
	}
}

// The ledger and the Services, as the original's Service controller leaves them.
func TestPlanUpgradeLedger(t *testing.T) {
	t0 := metav1.NewTime(time.Date(2024, 1, 1, 0, 0, 0, 0, time.UTC))
	lb := func(name, ip string, age int, mutate ...func(*corev1.Service)) corev1.Service {
		s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: name, UID: types.UID(name),
			CreationTimestamp: metav1.NewTime(t0.Add(time.Duration(age) * time.Hour)), Finalizers: []string{paasv1.OriginalServiceFinalizer}},
			Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
		if ip != "" {
			s.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
		}
		for _, m := range mutate {
			m(&s)
		}
		return s
	}
	ledger := func(ip, owner string) paasv1.IP {
		return paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: ip, Labels: map[string]string{paasv1.IPGroupLabel: "lab"},
			Annotations: map[string]string{paasv1.OwnerAnnotation: owner}}}
	}
	deleting := func(s *corev1.Service) { s.DeletionTimestamp = &t0 }
	in := Installation{Namespace: paasv1.OriginalNamespace,
		Groups: []paasv1.IPGroup{{ObjectMeta: metav1.ObjectMeta{Name: "lab"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24", ExcludedIPs: []string{"192.0.2.200", "192.0.2.240/28"}}}},
		Services: []corev1.Service{
			lb("api", "192.0.2.1", 0),
			lb("old", "192.0.2.3", 1, deleting),
			lb("web", "192.0.2.4", 2),
			lb("twin", "192.0.2.4", 3),       // the same address as web, younger
			lb("excluded", "192.0.2.200", 4), // excluded since
			lb("outside", "198.51.100.7", 5), // no group
			lb("moved", "192.0.2.6", 6),      // the ledger says 192.0.2.5
			lb("plain", "", 7, func(s *corev1.Service) { s.Spec.Type = corev1.ServiceTypeClusterIP }), // stopped being a LoadBalancer
		},
		Ledger: []paasv1.IP{
			ledger("192.0.2.1", "shop/api"),
			ledger("192.0.2.3", "shop/old"),
			ledger("192.0.2.4", "shop/web"),
			ledger("192.0.2.5", "shop/moved"),
			ledger("192.0.2.9", "shop/gone"),
			{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.50", Labels: map[string]string{paasv1.LegacyGSMLabel: "gsm"}, // a 0.3 VirtualIP's
				Annotations: map[string]string{paasv1.OwnerAnnotation: "shop/legacy"}}},
		},
		VirtualIPs: []paasv1.VirtualIP{
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "legacy"}, Status: paasv1.VirtualIPStatus{State: paasv1.VirtualIPValid, IP: "192.0.2.50"}},
			{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "done"}, Status: paasv1.VirtualIPStatus{State: paasv1.VirtualIPMigrated, IP: "192.0.2.51"}},
		},
	}
	p := PlanUpgrade(in)
	var out bytes.Buffer
	p.Write(&out, in.Namespace)
	text := out.String()

	wantAdopt := []Adoption{
		{IP: "192.0.2.1", Address: "192.0.2.1", Service: types.NamespacedName{Namespace: "shop", Name: "api"}},
		{IP: "192.0.2.4", Address: "192.0.2.4", Service: types.NamespacedName{Namespace: "shop", Name: "web"}},
	}
	if !slices.Equal(p.Adopt, wantAdopt) {
		t.Errorf("adopts %+v, want %+v", p.Adopt, wantAdopt)
	}
	var orphans []string
	for _, o := range p.Orphans {
		orphans = append(orphans, o.IP+": "+o.Why)
	}
	if want := []string{"192.0.2.5: Service shop/moved shows 192.0.2.6 instead", "192.0.2.9: Service shop/gone no longer exists"}; !slices.Equal(orphans, want) {
		t.Errorf("orphans %q, want %q", orphans, want)
	}
	if len(p.Finalizers) != 8 {
		t.Errorf("every Service with the finalizer loses it, got %d: %+v", len(p.Finalizers), p.Finalizers)
	}
	for _, f := range p.Finalizers {
		if f.Service.Name == "old" && (!f.Deleting || !slices.Equal(f.Release, []string{"192.0.2.3"})) {
			t.Errorf("the Service being deleted releases its address: %+v", f)
		}
	}
	if p.Keep != 3 { // api, web, moved
		t.Errorf("keep %d, want 3", p.Keep)
	}
	for _, want := range []string{
		"Service shop/twin shows 192.0.2.4, which Service shop/web shows too",
		"Service shop/excluded holds 192.0.2.200, which IPGroup lab excludes",
		"Service shop/outside holds 198.51.100.7, which no IPGroup's segment contains",
		"VirtualIPs still to migrate (vip-allocator migrate all, or annotate each with virtualips.paas.org/migrate): shop/legacy\n",
		"Service shop/old (being deleted): releases 192.0.2.3, removes finalizer ips.paas.org/finalizer, the deletion completes",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("the plan does not say %q:\n%s", want, text)
		}
	}
	if len(p.Problems) != 3 {
		t.Errorf("problems: %q", p.Problems)
	}
}
