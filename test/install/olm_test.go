//go:build envtest

package install

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/cmd"
	agentctrl "github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
	"github.com/paas-org/vip-allocator-operator/test/operatortest"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestOLMInstallChecksAdmissionPolicies installs the OLM bundle the way OLM
// does, into a namespace of its choosing (the CRDs; the CSV's permissions and
// cluster permissions as Roles and ClusterRoles bound to the ServiceAccounts;
// the operator with the CSV Deployment's arguments), and checks that the
// operator, with exactly those permissions, may write no admission policy,
// reports the policies missing until an administrator applies
// deploy/admission-policies.yaml for that namespace, and that they then hold.
func TestOLMInstallChecksAdmissionPolicies(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	const ns = "operators-olm"
	c := startCluster(t)
	ctx := context.Background()
	admin, err := client.New(c.admin, client.Options{Scheme: paasv1.NewScheme()})
	testenv.Must(t, err)
	for _, crd := range []string{"bgppeers", "groupsegmentmappings", "ipgroups", "ips", "nodeviews", "virtualips"} {
		c.mustKubectl(t, "create", "-f", "bundle/manifests/paas.org_"+crd+".yaml")
	}
	c.mustKubectl(t, "create", "namespace", ns)
	csv := readCSV(t)
	for _, sa := range []string{"vip-allocator-operator", "vip-allocator-agent"} {
		testenv.Must(t, admin.Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: sa}}))
	}
	for i, p := range csv.Spec.Install.Spec.ClusterPermissions {
		name := fmt.Sprintf("olm-%s-%d", p.ServiceAccountName, i)
		testenv.Must(t, admin.Create(ctx, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: name}, Rules: p.Rules}))
		testenv.Must(t, admin.Create(ctx, &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: p.ServiceAccountName}}}))
	}
	for i, p := range csv.Spec.Install.Spec.Permissions {
		name := fmt.Sprintf("olm-%s-%d", p.ServiceAccountName, i)
		testenv.Must(t, admin.Create(ctx, &rbacv1.Role{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Rules: p.Rules}))
		testenv.Must(t, admin.Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: name},
			Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: p.ServiceAccountName}}}))
	}
	dep := csv.Spec.Install.Spec.Deployments[0].Spec.Template.Spec.Containers[0]
	if !strings.Contains(strings.Join(dep.Args, " "), "--admission-policies") {
		t.Fatalf("the CSV's operator runs with %v: without --admission-policies nothing reports missing policies", dep.Args)
	}

	operatorUser := "system:serviceaccount:" + ns + ":vip-allocator-operator"
	policies := readObjects(t, "deploy/admission-policies.yaml")
	t.Run("RBAC: the operator may read its admission policies and write none", func(t *testing.T) {
		operatorMayNotWritePolicies(t, admin, operatorUser, ns, policies, true)
	})

	cfg := rest.CopyConfig(c.admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: operatorUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	stop, err := operatortest.Start(cfg, cmd.OperatorOptions{MetricsAddr: "0", ProbeAddr: "0", Workers: 2, IPMode: "Proxy",
		LeaderElect: true, AdmissionPolicies: true, AdmissionPolicyPeriod: time.Second,
		Agent: agentctrl.Options{Namespace: ns, Image: dep.Image}})
	testenv.Must(t, err)
	t.Cleanup(func() { _ = stop() })

	t.Run("the operator reports every policy missing before an administrator applies them", func(t *testing.T) {
		for _, o := range policies {
			waitPolicyEvent(t, admin, o.GetKind(), o.GetName(), paasv1.EventAdmissionPolicyMissing)
		}
	})

	t.Run("an administrator applies deploy/admission-policies.yaml for the namespace (docs/install.md)", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(c.root, "deploy/admission-policies.yaml"))
		testenv.Must(t, err)
		moved := strings.ReplaceAll(string(data), "system:serviceaccount:vip-allocator-operator:", "system:serviceaccount:"+ns+":")
		if out, err := c.kubectl(moved, "apply", "--server-side", "-f", "-"); err != nil {
			t.Fatal(out)
		}
		for _, o := range policies {
			waitPolicyEvent(t, admin, o.GetKind(), o.GetName(), paasv1.EventAdmissionPolicyInForce)
		}
	})

	t.Run("the operator deploys the agent and labels its namespace, with the CSV's permissions", func(t *testing.T) {
		testenv.Eventually(t, settle, "the agent DaemonSet and the namespace label", func() error {
			if err := admin.Get(ctx, types.NamespacedName{Namespace: ns, Name: agentctrl.Name}, &appsv1.DaemonSet{}); err != nil {
				return err
			}
			return privileged(ctx, admin, ns)
		})
	})

	t.Run("the policies hold for this namespace's accounts", func(t *testing.T) {
		c.mustKubectl(t, "create", "clusterrole", "jane", "--verb=create", "--resource=ips.paas.org")
		c.mustKubectl(t, "create", "clusterrolebinding", "jane", "--clusterrole=jane", "--user=jane")
		c.onlyOperatorWritesLedger(t, operatorUser)
		for _, node := range []string{"node-a", "node-b"} {
			testenv.Must(t, admin.Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: node}}))
		}
		testenv.Must(t, admin.Create(ctx, agentPod(ns, "node-a", dep.Image)))
		token := strings.TrimSpace(c.mustKubectl(t, "create", "token", "-n", ns, agentctrl.ServiceAccount,
			"--bound-object-kind", "Pod", "--bound-object-name", "agent-node-a"))
		agent := c.tokenClient(t, token)
		testenv.Must(t, (&nodes.InterfacePublisher{Client: agent, NodeName: "node-a"}).Publish(ctx))
		err := (&nodes.InterfacePublisher{Client: agent, NodeName: "node-b"}).Publish(ctx)
		if err == nil || !strings.Contains(err.Error(), "may change only its own Node") {
			t.Fatalf("the agent of %s on node-a annotating node-b: %v, want a refusal", ns, err)
		}
	})

	t.Run("the operator reports a policy an administrator weakens", func(t *testing.T) {
		c.mustKubectl(t, "patch", "validatingadmissionpolicy", "vip-allocator-ip-ledger-writers", "--type=merge",
			"-p", `{"spec":{"matchConditions":[{"name":"never","expression":"false"}]}}`)
		waitPolicyEvent(t, admin, "ValidatingAdmissionPolicy", "vip-allocator-ip-ledger-writers", paasv1.EventAdmissionPolicyAltered)
	})
}

// operatorMayNotWritePolicies asks the API server's authorizer whether the
// operator may write a ValidatingAdmissionPolicy or binding: any (a deny-all
// policy of its own would stop the cluster) and each of its own (which
// constrain it). With checks (OLM: --admission-policies) it may get its own,
// else not even that.
func operatorMayNotWritePolicies(t *testing.T, admin client.Client, user, ns string, policies []*unstructured.Unstructured, checks bool) {
	t.Helper()
	may := func(verb, resource, name string) bool {
		sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: user, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: verb, Group: "admissionregistration.k8s.io",
				Version: "v1", Resource: resource, Name: name}}}
		testenv.Must(t, admin.Create(context.Background(), sar))
		return sar.Status.Allowed
	}
	resources := map[string]string{"ValidatingAdmissionPolicy": "validatingadmissionpolicies",
		"ValidatingAdmissionPolicyBinding": "validatingadmissionpolicybindings"}
	for _, resource := range resources {
		for _, verb := range []string{"create", "patch", "update", "delete", "deletecollection"} {
			if may(verb, resource, "") {
				t.Errorf("the operator may %s any %s", verb, resource)
			}
		}
	}
	if len(policies) == 0 {
		t.Fatal("no policies to ask about")
	}
	for _, o := range policies {
		resource := resources[o.GetKind()]
		for _, verb := range []string{"create", "patch", "update", "delete"} {
			if may(verb, resource, o.GetName()) {
				t.Errorf("the operator may %s %s %s", verb, resource, o.GetName())
			}
		}
		if got := may("get", resource, o.GetName()); got != checks {
			t.Errorf("the operator may get %s %s: %v, want %v (only where it checks them)", resource, o.GetName(), got, checks)
		}
	}
}

// waitPolicyEvent waits for an Event with reason on the policy or binding
// kind/name (cluster-scoped objects' Events are in default).
func waitPolicyEvent(t *testing.T, admin client.Client, kind, name, reason string) {
	t.Helper()
	testenv.Eventually(t, settle, fmt.Sprintf("Event %s on %s %s", reason, kind, name), func() error {
		var events corev1.EventList
		if err := admin.List(context.Background(), &events, client.InNamespace(metav1.NamespaceDefault)); err != nil {
			return err
		}
		var others []string
		for _, e := range events.Items {
			if e.InvolvedObject.Kind != kind || e.InvolvedObject.Name != name {
				continue
			}
			if e.Reason == reason {
				return nil
			}
			others = append(others, e.Reason+": "+e.Message)
		}
		return fmt.Errorf("none; its Events: %q", others)
	})
}

// olmCSV is what OLM reads of the CSV to install the operator.
type olmCSV struct {
	Spec struct {
		Install struct {
			Spec struct {
				Deployments []struct {
					Spec appsv1.DeploymentSpec `json:"spec"`
				} `json:"deployments"`
				ClusterPermissions []olmPermission `json:"clusterPermissions"`
				Permissions        []olmPermission `json:"permissions"`
			} `json:"spec"`
		} `json:"install"`
	} `json:"spec"`
}

type olmPermission struct {
	ServiceAccountName string              `json:"serviceAccountName"`
	Rules              []rbacv1.PolicyRule `json:"rules"`
}

func readCSV(t *testing.T) olmCSV {
	t.Helper()
	objs := readObjects(t, "bundle/manifests/vip-allocator-operator.clusterserviceversion.yaml")
	raw, err := json.Marshal(objs[0].Object)
	testenv.Must(t, err)
	var csv olmCSV
	testenv.Must(t, json.Unmarshal(raw, &csv))
	if len(csv.Spec.Install.Spec.Deployments) != 1 {
		t.Fatalf("want one Deployment in the CSV, got %d", len(csv.Spec.Install.Spec.Deployments))
	}
	return csv
}
