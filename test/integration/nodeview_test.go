//go:build envtest

package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/nodeview"
	"github.com/paas-org/vip-allocator-operator/nodeagent/nodes"
)

// viewNode creates a Node as a kubelet and its agent leave it (deleted when
// the test ends).
func viewNode(name, ip string) *corev1.Node {
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"kubernetes.io/hostname": name},
		Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","mac":"52:54:00:00:00:01","addrs":["` + ip + `/24"]}]`}}}
	Expect(k8s.Create(ctx, n)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, n))).To(Succeed()) })
	n.Status = corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now(), Reason: "KubeletReady"}}}
	Expect(k8s.Status().Update(ctx, n)).To(Succeed())
	return n
}

// agentOf is a client acting as the agent of node (its ServiceAccount, its
// node bound into the token).
func agentOf(node string) client.Client {
	return clientAs(env.AgentConfig(node))
}

func clientAs(cfg *rest.Config) client.Client {
	c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	return c
}

func viewOf(name string) *paasv1.NodeView {
	return &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: paasv1.NodeViewSpec{Unschedulable: true,
		Addresses: []paasv1.NodeViewAddress{{Type: "InternalIP", Address: "192.0.2.66"}}}}
}

var _ = Describe("NodeView", func() {
	It("is written by each agent for its own node only, its interfaces only, and by nobody else but the operator and admins", func() {
		ctx := context.Background()
		a := viewNode("nv-a", "192.0.2.81")
		b := viewNode("nv-b", "192.0.2.82")

		By("the agent of nv-a creates no view, its own or another's: the operator does (RBAC)")
		for _, name := range []string{"nv-a", "nv-b", "nv-made-up"} {
			Expect(agentOf("nv-a").Create(ctx, viewOf(name))).To(MatchError(ContainSubstring(`cannot create resource "nodeviews"`)))
		}
		// The operator of this suite may have created it already, from the Node.
		own, _ := nodeview.Of(a)
		if err := k8s.Create(ctx, own); !apierrors.IsAlreadyExists(err) {
			Expect(err).NotTo(HaveOccurred())
		}
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, own))).To(Succeed()) })
		By("the agent's ServiceAccount with a token bound to no node")
		noNode := rest.CopyConfig(env.AgentConfig("nv-a"))
		noNode.Impersonate.Extra = nil
		// Eventually: the suite may begin here, as the API server loads the
		// policies it was just given.
		Eventually(func() error {
			var v paasv1.NodeView
			if err := k8s.Get(ctx, types.NamespacedName{Name: "nv-a"}, &v); err != nil {
				return err
			}
			return clientAs(noNode).Update(ctx, &v)
		}).Should(MatchError(ContainSubstring("the token of this request names no node")))
		By("another identity that RBAC lets write them")
		role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "nv-writer"},
			Rules: []rbacv1.PolicyRule{{APIGroups: []string{"paas.org"}, Resources: []string{"nodeviews"}, Verbs: []string{"create", "update"}}}}
		binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "nv-writer"},
			RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "nv-writer"},
			Subjects: []rbacv1.Subject{{Kind: "User", APIGroup: "rbac.authorization.k8s.io", Name: "nv-writer"}}}
		for _, o := range []client.Object{role, binding} {
			Expect(k8s.Create(ctx, o)).To(Succeed())
			DeferCleanup(func() { Expect(k8s.Delete(ctx, o)).To(Succeed()) })
		}
		writer := rest.CopyConfig(env.AdminConfig)
		writer.Impersonate = rest.ImpersonationConfig{UserName: "nv-writer", Groups: []string{"system:authenticated"}}
		Eventually(func() error { return clientAs(writer).Create(ctx, viewOf("nv-b")) }).
			Should(MatchError(ContainSubstring("NodeViews are written by the vip-allocator agent of each node and the operator (and cluster admins), not by nv-writer")))

		By("its own view, owned by its Node, but not by another Node")
		var owned paasv1.NodeView
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "nv-a"}, &owned)).To(Succeed())
		owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: "nv-b", UID: b.UID}}
		Expect(agentOf("nv-a").Update(ctx, &owned)).To(MatchError(ContainSubstring("the NodeView of node nv-a may be owned by its Node only")))

		By("its own view: the interfaces, never the labels, cordon, deletion or addresses, which are the Node's")
		Eventually(func(g Gomega) {
			var v paasv1.NodeView
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "nv-a"}, &v)).To(Succeed())
			v.Spec.Interfaces = []paasv1.NodeViewInterface{{Name: "eth1", Addrs: []string{"198.51.100.81/24"}}}
			g.Expect(agentOf("nv-a").Update(ctx, &v)).To(Succeed())
		}).Should(Succeed())
		for _, forge := range []func(*paasv1.NodeView){
			func(v *paasv1.NodeView) { v.Spec.Unschedulable = !v.Spec.Unschedulable },
			func(v *paasv1.NodeView) { delete(v.Spec.Labels, "kubernetes.io/hostname") },
			func(v *paasv1.NodeView) { v.Spec.Labels = map[string]string{"pool": "edge"} },
			func(v *paasv1.NodeView) { v.Spec.Deleting = true },
			func(v *paasv1.NodeView) {
				v.Spec.Addresses = []paasv1.NodeViewAddress{{Type: "InternalIP", Address: "198.51.100.1"}}
			},
		} {
			var v paasv1.NodeView
			Expect(k8s.Get(ctx, types.NamespacedName{Name: "nv-a"}, &v)).To(Succeed())
			forge(&v)
			Expect(agentOf("nv-a").Update(ctx, &v)).To(MatchError(ContainSubstring("the agent of node nv-a writes only the interfaces of its NodeView")))
		}
		By("an interface wider than a /16 (IPv4) or a /48 (IPv6) is refused, whoever writes it")
		for _, wide := range []string{"203.0.113.7/0", "198.51.100.7/15", "2001:db8::7/47"} {
			var v paasv1.NodeView
			Expect(k8s.Get(ctx, types.NamespacedName{Name: "nv-a"}, &v)).To(Succeed())
			v.Spec.Interfaces = []paasv1.NodeViewInterface{{Name: "eth0", Addrs: []string{wide}}}
			Expect(agentOf("nv-a").Update(ctx, &v)).To(MatchError(ContainSubstring("no wider than /16 (IPv4) or /48 (IPv6)")), wide)
			Expect(k8s.Update(ctx, &v)).To(MatchError(ContainSubstring("no wider than /16 (IPv4) or /48 (IPv6)")), wide)
		}

		By("nv-b's agent may not change nv-a's view either")
		var got paasv1.NodeView
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "nv-a"}, &got)).To(Succeed())
		got.Spec.Unschedulable = true
		Expect(agentOf("nv-b").Update(ctx, &got)).To(MatchError(ContainSubstring("may write only the NodeView of its own node, not nv-a")))
		By("an admin may")
		Expect(k8s.Update(ctx, &got)).To(Succeed())
	})

	It("follows its Node: the interfaces as the agent publishes them, cordon, labels, addresses as the operator copies them; a status report changes nothing", func() {
		ctx := context.Background()
		n := viewNode("nv-pub", "192.0.2.91")
		viewNode("nv-other", "192.0.2.92")

		// The agent's publisher with the agent's cache (its own Node only),
		// as the agent's own identity, named in the views' managed fields: the
		// operator creates the view and copies the Node's labels, cordon and
		// addresses into it; the agent keeps the interfaces.
		cfg := env.AgentConfig("nv-pub")
		cfg.UserAgent = "nv-pub-agent"
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{Scheme: paasv1.NewScheme(),
			Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0", Cache: nodes.CacheOptions("nv-pub")})
		Expect(err).NotTo(HaveOccurred())
		Expect((&nodes.ViewPublisher{Client: mgr.GetClient(), NodeName: "nv-pub"}).SetupWithManager(mgr)).To(Succeed())
		mgrCtx, stop := context.WithCancel(ctx)
		done := make(chan struct{})
		go func() {
			defer GinkgoRecover()
			defer close(done)
			Expect(mgr.Start(mgrCtx)).To(Succeed())
		}()
		DeferCleanup(func() { stop(); <-done })
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: "nv-pub"}}))).To(Succeed())
		})

		view := func(g Gomega) paasv1.NodeView {
			var v paasv1.NodeView
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "nv-pub"}, &v)).To(Succeed())
			return v
		}
		By("published, owned by its Node")
		Eventually(func(g Gomega) {
			v := view(g)
			g.Expect(v.OwnerReferences).To(HaveExactElements(HaveField("UID", n.UID)))
			g.Expect(v.Spec.Addresses).To(Equal([]paasv1.NodeViewAddress{{Type: "InternalIP", Address: "192.0.2.91"}}))
			g.Expect(v.Spec.Interfaces).To(Equal([]paasv1.NodeViewInterface{{Name: "eth0", MAC: "52:54:00:00:00:01", Addrs: []string{"192.0.2.91/24"}}}))
		}).Should(Succeed())
		By("the interfaces follow the annotation, written by the agent")
		var cur corev1.Node
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "nv-pub"}, &cur)).To(Succeed())
		cur.Annotations[paasv1.NodeInterfacesAnnotation] = `[{"name":"eth0","mac":"52:54:00:00:00:01","addrs":["192.0.2.91/25"]}]`
		Expect(k8s.Update(ctx, &cur)).To(Succeed())
		Eventually(func(g Gomega) {
			v := view(g)
			g.Expect(v.Spec.Interfaces).To(Equal([]paasv1.NodeViewInterface{{Name: "eth0", MAC: "52:54:00:00:00:01", Addrs: []string{"192.0.2.91/25"}}}))
			g.Expect(v.ManagedFields).To(ContainElement(HaveField("Manager", "nv-pub-agent")), "the interfaces written by the agent")
		}).Should(Succeed())
		By("the agent's cache holds its own Node only")
		var cached corev1.NodeList
		Expect(mgr.GetClient().List(ctx, &cached)).To(Succeed())
		Expect(cached.Items).To(HaveExactElements(HaveField("Name", "nv-pub")))

		change := func(f func(*corev1.Node), status bool) {
			var cur corev1.Node
			Expect(k8s.Get(ctx, types.NamespacedName{Name: "nv-pub"}, &cur)).To(Succeed())
			f(&cur)
			if status {
				Expect(k8s.Status().Update(ctx, &cur)).To(Succeed())
			} else {
				Expect(k8s.Update(ctx, &cur)).To(Succeed())
			}
		}
		By("cordoned")
		change(func(n *corev1.Node) { n.Spec.Unschedulable = true }, false)
		Eventually(func(g Gomega) { g.Expect(view(g).Spec.Unschedulable).To(BeTrue()) }).Should(Succeed())
		By("labelled (excluded from load balancers)")
		change(func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" }, false)
		Eventually(func(g Gomega) { g.Expect(view(g).Spec.Labels).To(HaveKey(corev1.LabelNodeExcludeBalancers)) }).Should(Succeed())
		By("an address changed")
		change(func(n *corev1.Node) { n.Status.Addresses[0].Address = "192.0.2.93" }, true)
		Eventually(func(g Gomega) {
			g.Expect(view(g).Spec.Addresses).To(Equal([]paasv1.NodeViewAddress{{Type: "InternalIP", Address: "192.0.2.93"}}))
		}).Should(Succeed())
		before := view(Default)

		By("status reports (heartbeats, conditions) and another annotation: the view stays as it is")
		for i := range 3 {
			change(func(n *corev1.Node) {
				n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Duration(i+1) * time.Second))
				n.Status.Conditions[0].Message = "kubelet is posting ready status"
			}, true)
		}
		change(func(n *corev1.Node) { n.Annotations["example.com/note"] = "x" }, false)
		By("... then a label, which it shows: written once, so nothing was written before it")
		change(func(n *corev1.Node) { n.Labels["rack"] = "r2" }, false)
		Eventually(func(g Gomega) { g.Expect(view(g).Spec.Labels).To(HaveKeyWithValue("rack", "r2")) }).Should(Succeed())
		after := view(Default)
		Expect(after.Generation).To(Equal(before.Generation + 1))

		By("deleted by hand: written again")
		Expect(k8s.Delete(ctx, &after)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(view(g).UID).NotTo(Equal(after.UID)) }).Should(Succeed())
	})

	It("is published by the operator for a node whose agent publishes none (an agent from before NodeViews), and kept", func() {
		ctx := context.Background()
		n := viewNode("nv-old", "192.0.2.95")
		DeferCleanup(func() {
			Expect(client.IgnoreNotFound(k8s.Delete(ctx, &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: "nv-old"}}))).To(Succeed())
		})
		view := func(g Gomega) paasv1.NodeView {
			var v paasv1.NodeView
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "nv-old"}, &v)).To(Succeed())
			return v
		}
		By("published, owned by its Node, what its agent would have published")
		want, _ := nodeview.Of(n)
		Eventually(func(g Gomega) {
			v := view(g)
			g.Expect(v.OwnerReferences).To(HaveExactElements(HaveField("UID", n.UID)))
			g.Expect(nodeview.Differs(&v, want)).To(BeFalse())
		}).Should(Succeed())
		By("cordoned: the view follows")
		var cur corev1.Node
		Expect(k8s.Get(ctx, types.NamespacedName{Name: "nv-old"}, &cur)).To(Succeed())
		cur.Spec.Unschedulable = true
		Expect(k8s.Update(ctx, &cur)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(view(g).Spec.Unschedulable).To(BeTrue()) }).Should(Succeed())
		By("a node whose agent has published nothing (no interfaces annotation) gets no view")
		bare := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "nv-bare"}}
		Expect(k8s.Create(ctx, bare)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(ctx, bare))).To(Succeed()) })
		Consistently(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, types.NamespacedName{Name: "nv-bare"}, &paasv1.NodeView{}))
		}, 6*time.Second, 500*time.Millisecond).Should(BeTrue())
	})
})
