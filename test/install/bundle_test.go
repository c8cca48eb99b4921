//go:build envtest

package install

import (
	"context"
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
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	agentctrl "github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/nodeagent"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

const (
	namespace    = "vip-allocator-operator"
	operatorUser = "system:serviceaccount:vip-allocator-operator:vip-allocator-operator"
	agentUser    = "system:serviceaccount:vip-allocator-operator:vip-allocator-agent"
)

// settle is how long the checks wait for what they expect
// (testenv.Eventually).
const settle = 30 * time.Second

// operatorPod is the pod template of the operator Deployment in objects.
func operatorPod(t *testing.T, objects []*unstructured.Unstructured) corev1.PodSpec {
	t.Helper()
	for _, o := range objects {
		if o.GetKind() == "Deployment" {
			var d appsv1.Deployment
			if err := runtime.DefaultUnstructuredConverter.FromUnstructured(o.Object, &d); err != nil {
				t.Fatal(err)
			}
			return d.Spec.Template.Spec
		}
	}
	t.Fatal("no Deployment in the bundle")
	return corev1.PodSpec{}
}

// TestBundleLifecycle installs deploy/bundle.yaml the documented way, runs the
// operator with exactly the identity and permissions it grants, upgrades by
// applying the file again and uninstalls by deleting it.
func TestBundleLifecycle(t *testing.T) {
	ctrl.SetLogger(zap.New(zap.WriteTo(io.Discard)))
	c := startCluster(t)
	objects := readObjects(t, "deploy/bundle.yaml")
	st := &bundleLifecycle{c: c, objects: objects}
	st.installing(t)
	st.permissions(t)

	image := operatorPod(t, objects).Containers[0].Image
	admin, err := client.New(c.admin, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	metricsAddr := freeLoopbackAddr(t)
	stopOperator := c.runOperatorServingMetrics(t, image, metricsAddr)
	st.image = image
	st.admin = admin
	st.metricsAddr = metricsAddr
	st.operating(t)

	agentToken := strings.TrimSpace(c.mustKubectl(t, "create", "token", "-n", namespace, agentctrl.ServiceAccount))
	agentDS := types.NamespacedName{Namespace: namespace, Name: agentctrl.Name}
	// The agent watches its DaemonSet while it runs, as a real one does
	// (nodeagent.Server): what it sees decides whether a refused token on
	// the way out is an uninstall.
	watchCtx, stopWatch := context.WithCancel(ctx)
	defer stopWatch()
	watched := nodeagent.WatchDeletion(watchCtx, c.tokenClient(t, agentToken), agentDS)
	st.agentToken = agentToken
	st.agentDS = agentDS
	st.watched = watched
	st.stopping(t)

	stopOperator() // its Deployment goes with the bundle; here it is a process
	st.removal(t)
}

// bundleLifecycle is TestBundleLifecycle's lab and what its steps share.
type bundleLifecycle struct {
	c           *cluster
	objects     []*unstructured.Unstructured
	image       string
	admin       client.Client
	metricsAddr string
	agentToken  string
	agentDS     types.NamespacedName
	watched     *nodeagent.DeletionWatch
}

// installing: the bundle created as documented, every object there, one image, the admission policies in force.
func (st *bundleLifecycle) installing(t *testing.T) {
	c, objects := st.c, st.objects
	t.Run("kubectl create namespace && kubectl create -f deploy/bundle.yaml", func(t *testing.T) {
		c.mustKubectl(t, "create", "namespace", namespace)
		out := c.mustKubectl(t, "create", "-f", "deploy/bundle.yaml")
		if got := strings.Count(out, " created"); got != len(objects) {
			t.Fatalf("%d of %d objects created:\n%s", got, len(objects), out)
		}
	})

	t.Run("every object is there and every CRD is Established", func(t *testing.T) {
		var crds []string
		for _, o := range objects {
			c.mustKubectl(t, "get", "-n", namespace, ref(o))
			if o.GetKind() == "CustomResourceDefinition" {
				crds = append(crds, ref(o))
			}
		}
		if len(crds) != 6 {
			t.Fatalf("want the 6 CRDs, the bundle has %v", crds)
		}
		c.mustKubectl(t, append([]string{"wait", "--for", "condition=Established", "--timeout", "60s"}, crds...)...)
	})

	t.Run("one image reference, the operator's", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(c.root, "deploy/bundle.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		if n := strings.Count(string(data), "image:"); n != 1 {
			t.Fatalf("want exactly one image reference, found %d", n)
		}
	})

	t.Run("admission policies are active", func(t *testing.T) {
		// jane may create VirtualIPs and IPs as far as RBAC goes: what stops her is the policy.
		c.mustKubectl(t, "create", "clusterrole", "jane", "--verb=create,delete", "--resource=virtualips.paas.org,ips.paas.org")
		c.mustKubectl(t, "create", "clusterrolebinding", "jane", "--clusterrole=jane", "--user=jane")
		vip := "apiVersion: paas.org/v1\nkind: VirtualIP\nmetadata: {name: old, namespace: default}\nspec: {service: web, ip: 192.0.2.7}\n"
		testenv.Eventually(t, settle, "a VirtualIP create is refused by the policy, with the way out", func() error {
			out, err := c.kubectl(vip, "create", "-f", "-", "--as=jane")
			if err == nil {
				c.mustKubectl(t, "delete", "virtualip", "-n", "default", "old")
				return fmt.Errorf("created")
			}
			if !strings.Contains(out, "ValidatingAdmissionPolicy 'vip-allocator-virtualip-deprecated'") ||
				!strings.Contains(out, `vip.paas.org/ips: "192.0.2.7"`) {
				return fmt.Errorf("refused, but not by the policy: %s", out)
			}
			return nil
		})
		c.onlyOperatorWritesLedger(t, operatorUser)
		c.mustKubectl(t, "delete", "ip.paas.org/192.0.2.9", "--as="+operatorUser)

		// Even a cluster admin may not write the addresses of a Service we serve: the agents
		// would refuse them anyway (they trust the ledger), but nobody should see them.
		svc := "apiVersion: v1\nkind: Service\nmetadata: {name: forged, namespace: default}\nspec: {type: LoadBalancer, ports: [{port: 80}]}\n"
		if out, err := c.kubectl(svc, "create", "-f", "-"); err != nil {
			t.Fatal(out)
		}
		testenv.Eventually(t, settle, "an admin's address in a Service status is refused by the policy", func() error {
			// A dry run: a write that got through before the policy was in force would make
			// every later identical one a no-op, which the policy allows.
			out, err := c.kubectl("", "patch", "service", "forged", "-n", "default", "--subresource=status", "--type=merge", "--dry-run=server",
				"-p", `{"status":{"loadBalancer":{"ingress":[{"ip":"192.0.2.251"}]}}}`)
			if err == nil || !strings.Contains(out, "ValidatingAdmissionPolicy 'vip-allocator-service-status-writers'") {
				return fmt.Errorf("%v %s", err, out)
			}
			return nil
		})
		c.mustKubectl(t, "delete", "service", "forged", "-n", "default")
	})
}

// permissions: what RBAC lets the operator and the agent do, and the agent's SCC.
func (st *bundleLifecycle) permissions(t *testing.T) {
	c := st.c
	t.Run("RBAC: the operator and the agent may do their work and nothing more", func(t *testing.T) {
		for _, tc := range []struct {
			who, verb, what, ns string
			want                string
		}{
			{operatorUser, "list", "services", "", "yes"},
			{operatorUser, "patch", "services --subresource=status", "", "yes"},
			{operatorUser, "update", "services", "", "no"},
			{operatorUser, "patch", "services", "", "yes"},  // migration converts Services; the original operator's finalizer is removed
			{operatorUser, "delete", "services", "", "yes"}, // migration deletes keepalived clones; an admission policy allows only those
			{operatorUser, "create", "ips.paas.org", "", "yes"},
			{operatorUser, "update", "nodeviews.paas.org", "", "yes"}, // the Node's part of every view, and interfaces no agent keeps
			{operatorUser, "delete", "nodeviews.paas.org", "", "no"},  // the garbage collector deletes them with their Node
			{operatorUser, "delete", "ips.paas.org", "", "yes"},
			{operatorUser, "patch", "ipgroups.paas.org --subresource=status", "", "yes"},
			{operatorUser, "delete", "ipgroups.paas.org", "", "no"},
			{operatorUser, "create", "virtualips.paas.org", "default", "no"},
			{operatorUser, "create", "daemonsets.apps", namespace, "yes"}, // the agent DaemonSet, in its own namespace only
			{operatorUser, "create", "daemonsets.apps", "default", "no"},
			{operatorUser, "list", "daemonsets.apps", "", "no"}, // its cache watches its namespace only
			{operatorUser, "patch", "daemonsets.apps/vip-allocator-agent", namespace, "yes"},
			{operatorUser, "patch", "daemonsets.apps/other", namespace, "no"},
			{operatorUser, "delete", "daemonsets.apps/vip-allocator-agent", namespace, "no"},
			{operatorUser, "create", "deployments.apps", namespace, "no"},
			{operatorUser, "create", "pods", namespace, "no"},
			{operatorUser, "get", "secrets", namespace, "yes"}, // the BGP passwords that BGPPeers name, in its namespace only
			{operatorUser, "get", "secrets", "default", "no"},
			{operatorUser, "list", "secrets", "", "no"},
			{operatorUser, "update", "secrets/vip-allocator-bgp-passwords", namespace, "yes"}, // its copy for the agents
			{operatorUser, "update", "secrets/other", namespace, "no"},
			{operatorUser, "create", "secrets", namespace, "yes"}, // the agents' two Secrets; an admission policy refuses any other
			{operatorUser, "create", "secrets", "default", "no"},
			{operatorUser, "create", "leases.coordination.k8s.io", namespace, "yes"},
			{operatorUser, "update", "leases.coordination.k8s.io/other", namespace, "no"},
			{operatorUser, "create", "leases.coordination.k8s.io", "default", "no"},
			{operatorUser, "get", "serviceaccounts/vip-allocator-agent", namespace, "yes"},
			{operatorUser, "get", "serviceaccounts/default", namespace, "no"},
			// Pod Security labels: a Role in a namespace reaches that Namespace object (the API
			// server authorizes namespaces/X in namespace X), so can-i needs -n.
			{operatorUser, "patch", "namespaces/vip-allocator-operator", namespace, "yes"},
			{operatorUser, "patch", "namespaces/default", "default", "no"},
			{operatorUser, "patch", "namespaces/default", "", "no"},
			// The admission policies constrain the operator: it writes none, under OLM neither
			// (olm_test.go), and a deny-all policy of its own would stop the cluster.
			{operatorUser, "create", "validatingadmissionpolicies.admissionregistration.k8s.io", "", "no"},
			{operatorUser, "patch", "validatingadmissionpolicies.admissionregistration.k8s.io/vip-allocator-ip-ledger-writers", "", "no"},
			{operatorUser, "update", "validatingadmissionpolicies.admissionregistration.k8s.io/vip-allocator-operator-secret-writes", "", "no"},
			{operatorUser, "delete", "validatingadmissionpolicies.admissionregistration.k8s.io/vip-allocator-operator-service-deletes", "", "no"},
			{operatorUser, "create", "validatingadmissionpolicybindings.admissionregistration.k8s.io", "", "no"},
			{operatorUser, "patch", "validatingadmissionpolicybindings.admissionregistration.k8s.io/vip-allocator-ip-ledger-writers", "", "no"},
			{operatorUser, "delete", "validatingadmissionpolicybindings.admissionregistration.k8s.io/vip-allocator-operator-service-updates", "", "no"},
			{agentUser, "list", "services", "", "yes"},
			{agentUser, "watch", "endpointslices.discovery.k8s.io", "", "yes"},
			{agentUser, "get", "nodes", "", "yes"},
			{agentUser, "create", "events", "default", "yes"},
			{agentUser, "update", "services", "", "no"},
			{agentUser, "patch", "services --subresource=status", "", "yes"}, // its condition vip.paas.org/Programmed; an admission policy allows nothing else
			{agentUser, "create", "ips.paas.org", "", "no"},
			{agentUser, "list", "ipgroups.paas.org", "", "yes"},                  // which VIPs to announce, and how
			{agentUser, "patch", "ips.paas.org --subresource=status", "", "yes"}, // records the announcing node (its own only: identity_test.go)
			{agentUser, "update", "ips.paas.org --subresource=status", "", "no"},
			{agentUser, "patch", "ips.paas.org", "", "no"},
			{agentUser, "delete", "ips.paas.org", "", "no"},
			{agentUser, "patch", "nodes", "", "yes"}, // publishes its interfaces (its own Node's annotation only: identity_test.go)
			{agentUser, "delete", "nodes", "", "no"},
			{agentUser, "update", "nodeviews.paas.org", "", "yes"}, // its node's view's interfaces (its own only: agent_nodeview_writes.yaml)
			{agentUser, "create", "nodeviews.paas.org", "", "no"},  // the operator creates views from the Nodes
			{agentUser, "watch", "nodeviews.paas.org", "", "yes"},  // reads the other nodes from their views
			{agentUser, "delete", "nodeviews.paas.org", "", "no"},
			{agentUser, "list", "bgppeers.paas.org", "", "yes"},
			{agentUser, "patch", "bgppeers.paas.org --subresource=status", "", "yes"}, // its own session entries
			{agentUser, "patch", "bgppeers.paas.org", "", "no"},
			{agentUser, "get", "secrets/vip-allocator-memberlist", namespace, "yes"},    // the gossip key
			{agentUser, "get", "secrets/vip-allocator-bgp-passwords", namespace, "yes"}, // the BGP passwords, copied by the operator
			{agentUser, "get", "secrets", namespace, "no"},
			{agentUser, "get", "secrets/other", namespace, "no"},
			{agentUser, "get", "daemonsets.apps/vip-allocator-agent", namespace, "yes"},
			{agentUser, "get", "daemonsets.apps/other", namespace, "no"},
			{agentUser, "list", "daemonsets.apps", namespace, "no"},
			{agentUser, "watch", "daemonsets.apps/vip-allocator-agent", namespace, "yes"}, // sees an uninstall coming
			{agentUser, "delete", "daemonsets.apps/vip-allocator-agent", namespace, "no"},
		} {
			args := append([]string{"auth", "can-i", tc.verb}, append(strings.Fields(tc.what), "--as="+tc.who)...)
			if tc.ns != "" {
				args = append(args, "-n", tc.ns)
			}
			out, _ := c.kubectl("", args...) // can-i exits 1 for "no"
			if got := strings.TrimSpace(lastLine(out)); got != tc.want {
				t.Errorf("%s %s %s -n %q: got %q, want %q", tc.who[strings.LastIndex(tc.who, ":")+1:], tc.verb, tc.what, tc.ns, out, tc.want)
			}
		}
	})

	t.Run("RBAC: the operator may write no admission policy or binding, its own least", func(t *testing.T) {
		admin, err := client.New(c.admin, client.Options{Scheme: paasv1.NewScheme()})
		if err != nil {
			t.Fatal(err)
		}
		var policies []*unstructured.Unstructured
		for _, o := range st.objects {
			if strings.HasPrefix(o.GetAPIVersion(), "admissionregistration.k8s.io/") {
				policies = append(policies, o)
			}
		}
		operatorMayNotWritePolicies(t, admin, operatorUser, namespace, policies, false)
	})

	t.Run("RBAC: the agent may use its OpenShift SCC and no other", func(t *testing.T) {
		// kubectl auth can-i needs the resource in discovery, and this is no
		// OpenShift: ask the authorizer directly.
		admin, err := client.New(c.admin, client.Options{Scheme: paasv1.NewScheme()})
		if err != nil {
			t.Fatal(err)
		}
		for scc, want := range map[string]bool{"vip-allocator-agent": true, "privileged": false, "restricted-v2": false} {
			sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
				User: agentUser, Groups: []string{"system:serviceaccounts", "system:serviceaccounts:" + namespace},
				ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "use", Group: "security.openshift.io",
					Resource: "securitycontextconstraints", Name: scc}}}
			if err := admin.Create(context.Background(), sar); err != nil {
				t.Fatal(err)
			}
			if sar.Status.Allowed != want {
				t.Errorf("agent may use SCC %s: %v, want %v", scc, sar.Status.Allowed, want)
			}
		}
	})
}

// operating: the operator as its ServiceAccount deploys the agent, passes Pod Security and hardening, serves metrics and Services.
func (st *bundleLifecycle) operating(t *testing.T) {
	c, objects, image, admin, metricsAddr := st.c, st.objects, st.image, st.admin, st.metricsAddr
	ctx := context.Background()

	t.Run("the operator, as its ServiceAccount, deploys the agent and labels the namespace", func(t *testing.T) {
		testenv.Eventually(t, settle, "the agent DaemonSet, owned by the agent ServiceAccount", func() error {
			ds := &appsv1.DaemonSet{}
			if err := admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: agentctrl.Name}, ds); err != nil {
				return err
			}
			if len(ds.OwnerReferences) != 1 || ds.OwnerReferences[0].Name != agentctrl.ServiceAccount {
				return fmt.Errorf("owners %v", ds.OwnerReferences)
			}
			if got := ds.Spec.Template.Spec.Containers[0].Image; got != image {
				return fmt.Errorf("agent image %s, want the operator's %s", got, image)
			}
			return nil
		})
		testenv.Eventually(t, settle, "the namespace admits the agent", func() error { return privileged(ctx, admin, namespace) })
	})

	t.Run("Pod Security: the operator passes restricted, the agent needs privileged and gets it only in its namespace", func(t *testing.T) {
		ds := &appsv1.DaemonSet{}
		if err := admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: agentctrl.Name}, ds); err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			ns, level string
			pod       corev1.PodSpec
			admitted  bool
		}{
			{"psa-restricted", "restricted", operatorPod(t, objects), true},
			{"psa-baseline", "baseline", ds.Spec.Template.Spec, false},
			{namespace, "", ds.Spec.Template.Spec, true},
		} {
			if tc.level != "" {
				c.mustKubectl(t, "create", "namespace", tc.ns)
				c.mustKubectl(t, "label", "namespace", tc.ns, "pod-security.kubernetes.io/enforce="+tc.level)
				c.mustKubectl(t, "create", "serviceaccount", "-n", tc.ns, tc.pod.ServiceAccountName)
			}
			pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: tc.ns, Name: "psa-probe"}, Spec: tc.pod}
			err := admin.Create(ctx, pod, client.DryRunAll)
			if tc.admitted && err != nil {
				t.Errorf("%s pod in %s: %v", tc.pod.ServiceAccountName, tc.ns, err)
			}
			if !tc.admitted && (err == nil || !strings.Contains(err.Error(), "violates PodSecurity")) {
				t.Errorf("%s pod in %s: want a PodSecurity refusal, got %v", tc.pod.ServiceAccountName, tc.ns, err)
			}
		}
	})

	t.Run("hardening: the agent's pod, and its namespace admits nothing more", func(t *testing.T) {
		ds := agentDaemonSet(t, admin)
		checkAgentPodHardening(t, ds)
		testAgentNamespacePolicy(t, admin, ds)
		testEphemeralContainers(t, admin, ds)
	})

	t.Run("metrics: TLS, and only for callers allowed to get /metrics", func(t *testing.T) {
		testMetricsAuth(t, c, metricsAddr)
	})

	t.Run("a LoadBalancer Service gets an address with the bundle's permissions", func(t *testing.T) {
		c.mustKubectl(t, "create", "-f", "config/samples/ipgroup.yaml")
		c.mustKubectl(t, "create", "service", "loadbalancer", "web", "--tcp=80:8080")
		testenv.Eventually(t, settle, "web holds 192.0.2.1", func() error {
			out, err := c.kubectl("", "get", "service", "web", "-o", "jsonpath={.status.loadBalancer.ingress[0].ip}")
			if err != nil || out != "192.0.2.1" {
				return fmt.Errorf("%q %v", out, err)
			}
			return nil
		})
	})
}

// stopping: an agent stopping while installed, an upgrade, a Service deleted while the operator runs.
func (st *bundleLifecycle) stopping(t *testing.T) {
	c, image, agentToken, agentDS, watched := st.c, st.image, st.agentToken, st.agentDS, st.watched

	t.Run("an agent that stops while installed keeps its rules", func(t *testing.T) {
		verdict, err := nodeagent.TeardownIfUninstalled(c.tokenClient(t, agentToken), agentDS, "node1", watched, func() error {
			t.Fatal("cleanup ran on a restart")
			return nil
		})
		if err != nil || verdict.Uninstall {
			t.Fatalf("%+v %v", verdict, err)
		}
	})

	t.Run("upgrade: kubectl apply --server-side of the new file", func(t *testing.T) {
		data, err := os.ReadFile(filepath.Join(c.root, "deploy/bundle.yaml"))
		if err != nil {
			t.Fatal(err)
		}
		next := strings.Replace(string(data), "image: "+image, "image: registry.example/mirror/vip-allocator:9.9.9", 1)
		// The first server-side apply after 'kubectl create' takes the fields
		// over from kubectl-create (the API server filled in defaults there).
		if out, err := c.kubectl(next, "apply", "--server-side", "--force-conflicts", "-f", "-"); err != nil {
			t.Fatal(out)
		}
		out := c.mustKubectl(t, "get", "deployment", "-n", namespace, "vip-allocator-operator", "-o", "jsonpath={.spec.template.spec.containers[0].image}")
		if out != "registry.example/mirror/vip-allocator:9.9.9" {
			t.Fatalf("image after the upgrade: %s", out)
		}
	})

	// The operator holds a LoadBalancer Service by its cleanup finalizer until
	// the address is released: Services go before the operator does.
	t.Run("a Service deleted while the operator runs goes once its address is released", func(t *testing.T) {
		c.mustKubectl(t, "delete", "service", "web", "--timeout=60s")
		// With its last address released, the group loses the finalizer that
		// protects held addresses: the uninstall, which stops the operator,
		// then finds nothing left to let go of (docs/install.md's order).
		testenv.Eventually(t, settle, "the IPGroup without the addresses-held finalizer", func() error {
			if f := c.mustKubectl(t, "get", "ipgroups.paas.org", "192.0.2.0-24", "-o", "jsonpath={.metadata.finalizers}"); f != "" {
				return fmt.Errorf("finalizers %s", f)
			}
			return nil
		})
	})
}

// removal: uninstalls with kubectl delete and apply, and the agent removing its rules once its DaemonSet is gone.
func (st *bundleLifecycle) removal(t *testing.T) {
	c, objects, admin, agentToken, agentDS, watched := st.c, st.objects, st.admin, st.agentToken, st.agentDS, st.watched
	ctx := context.Background()

	t.Run("uninstall: kubectl delete -f deploy/bundle.yaml removes every object", func(t *testing.T) {
		c.uninstall(t, "deploy/bundle.yaml")
		for _, o := range objects {
			if out := c.mustKubectl(t, "get", "-n", namespace, ref(o), "--ignore-not-found"); out != "" {
				t.Errorf("left behind: %s", out)
			}
		}
	})

	t.Run("install and uninstall with kubectl apply --server-side", func(t *testing.T) {
		c.mustKubectl(t, "apply", "--server-side", "-f", "deploy/bundle.yaml")
		// Applying the same file again changes nothing and needs no force.
		c.mustKubectl(t, "apply", "--server-side", "-f", "deploy/bundle.yaml")
		for _, o := range objects {
			c.mustKubectl(t, "get", "-n", namespace, ref(o))
		}
		c.uninstall(t, "deploy/bundle.yaml")
		for _, o := range objects {
			if out := c.mustKubectl(t, "get", "-n", namespace, ref(o), "--ignore-not-found"); out != "" {
				t.Errorf("left behind: %s", out)
			}
		}
	})

	t.Run("the agent DaemonSet's only owner is gone, so the garbage collector deletes it", func(t *testing.T) {
		ds := &appsv1.DaemonSet{}
		if err := admin.Get(ctx, agentDS, ds); err != nil {
			t.Fatal(err) // this control plane runs no garbage collector
		}
		sa := &corev1.ServiceAccount{}
		err := admin.Get(ctx, types.NamespacedName{Namespace: namespace, Name: ds.OwnerReferences[0].Name}, sa)
		if !apierrors.IsNotFound(err) {
			t.Fatalf("owner %s still exists: %v", ds.OwnerReferences[0].Name, err)
		}
	})

	t.Run("a refused token alone keeps the rules: the ServiceAccount is gone, the DaemonSet not yet", func(t *testing.T) {
		saved := nodeagent.StopPatience
		defer func() { nodeagent.StopPatience = saved }()
		nodeagent.StopPatience = 2 * time.Second
		verdict, err := nodeagent.TeardownIfUninstalled(c.tokenClient(t, agentToken), agentDS, "node1", watched, func() error {
			t.Error("cleanup ran on a 401 alone")
			return nil
		})
		if err != nil || verdict.Uninstall || !verdict.Unsure || !strings.Contains(verdict.Why, "rules kept") {
			t.Fatalf("want the rules kept on a 401 with no deletion seen, got %+v %v", verdict, err)
		}
	})

	t.Run("the agent's open watch sees the garbage collector delete the DaemonSet, and the agent then removes its rules", func(t *testing.T) {
		// What the garbage collector does once the owner is gone (this
		// control plane runs none): the watch opened before the uninstall
		// still delivers the deletion although the token is refused now.
		ds := &appsv1.DaemonSet{}
		if err := admin.Get(ctx, agentDS, ds); err != nil {
			t.Fatal(err)
		}
		if err := admin.Delete(ctx, ds, client.PropagationPolicy(metav1.DeletePropagationBackground)); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, "the agent's watch saw the deletion", func() error {
			if !watched.Seen() {
				return fmt.Errorf("not seen")
			}
			return nil
		})
		cleaned := false
		verdict, err := nodeagent.TeardownIfUninstalled(c.tokenClient(t, agentToken), agentDS, "node1", watched, func() error {
			cleaned = true
			return nil
		})
		if err != nil || !verdict.Uninstall || !cleaned {
			t.Fatalf("verdict %+v, cleaned %v, %v", verdict, cleaned, err)
		}
		if !strings.Contains(verdict.Why, "seen deleted") || !strings.Contains(verdict.Why, "401") {
			t.Fatalf("want the token refusal and the deletion seen as the reason, got %q", verdict.Why)
		}
	})
}

// privileged says why namespace ns does not admit the agent yet (the labels
// the operator sets), or nil.
func privileged(ctx context.Context, c client.Reader, ns string) error {
	n := &corev1.Namespace{}
	if err := c.Get(ctx, types.NamespacedName{Name: ns}, n); err != nil {
		return err
	}
	if n.Labels["pod-security.kubernetes.io/enforce"] != "privileged" {
		return fmt.Errorf("labels %v", n.Labels)
	}
	return nil
}

// onlyOperatorWritesLedger checks that jane (whom RBAC lets create IPs) is
// refused by the ledger policy and operator is not: it creates IP 192.0.2.9.
func (c *cluster) onlyOperatorWritesLedger(t *testing.T, operator string) {
	t.Helper()
	ip := "apiVersion: paas.org/v1\nkind: IP\nmetadata: {name: 192.0.2.9}\n"
	testenv.Eventually(t, settle, "only the operator writes the IP ledger", func() error {
		out, err := c.kubectl(ip, "create", "-f", "-", "--as=jane")
		if err == nil || !strings.Contains(out, "only the operator writes them") {
			return fmt.Errorf("jane: %v %s", err, out)
		}
		return nil
	})
	if out, err := c.kubectl(ip, "create", "-f", "-", "--as="+operator); err != nil {
		t.Fatalf("the operator %s must write the ledger: %s", operator, out)
	}
}

func lastLine(s string) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return lines[len(lines)-1]
}
