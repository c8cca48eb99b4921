//go:build envtest

package install

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// TestOLMInstallGetsAdmissionPolicies installs the OLM bundle the way OLM
// does, into a namespace of its choosing (the CRDs; the CSV's permissions and
// cluster permissions as Roles and ClusterRoles bound to the ServiceAccounts;
// the operator with the CSV Deployment's arguments), and checks that the
// operator, with exactly those permissions, applies the admission policies for
// that namespace and that they hold.
func TestOLMInstallGetsAdmissionPolicies(t *testing.T) {
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
		t.Fatalf("the CSV's operator runs with %v: without --admission-policies an OLM install has none", dep.Args)
	}

	operatorUser := "system:serviceaccount:" + ns + ":vip-allocator-operator"
	cfg := rest.CopyConfig(c.admin)
	cfg.Impersonate = rest.ImpersonationConfig{UserName: operatorUser,
		Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + ns, "system:authenticated"}}
	stop, err := operatortest.Start(cfg, cmd.OperatorOptions{MetricsAddr: "0", ProbeAddr: "0", Workers: 2, IPMode: "Proxy",
		LeaderElect: true, AdmissionPolicies: true, Agent: agentctrl.Options{Namespace: ns, Image: dep.Image}})
	testenv.Must(t, err)
	t.Cleanup(func() { _ = stop() })

	t.Run("the operator applies every policy of config/admission, naming the ServiceAccounts of its namespace", func(t *testing.T) {
		want := readObjects(t, "deploy/bundle.yaml")
		testenv.Eventually(t, settle, "the policies and bindings", func() error {
			for _, o := range want {
				if !strings.HasPrefix(o.GetAPIVersion(), "admissionregistration.k8s.io/") {
					continue
				}
				if o.GetKind() == "ValidatingAdmissionPolicyBinding" {
					if err := admin.Get(ctx, types.NamespacedName{Name: o.GetName()}, &admissionv1.ValidatingAdmissionPolicyBinding{}); err != nil {
						return err
					}
					continue
				}
				p := &admissionv1.ValidatingAdmissionPolicy{}
				if err := admin.Get(ctx, types.NamespacedName{Name: o.GetName()}, p); err != nil {
					return err
				}
				raw, _ := json.Marshal(p.Spec)
				bundled, _ := json.Marshal(o.Object["spec"])
				if strings.Contains(string(raw), "system:serviceaccount:vip-allocator-operator:") {
					return fmt.Errorf("policy %s still names the bundle's namespace: %s", p.Name, raw)
				}
				if strings.Contains(string(bundled), "system:serviceaccount:vip-allocator-operator:") && !strings.Contains(string(raw), "system:serviceaccount:"+ns+":") {
					return fmt.Errorf("policy %s names no ServiceAccount of %s", p.Name, ns)
				}
			}
			return nil
		})
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
