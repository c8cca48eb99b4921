//go:build envtest

package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

var _ = Describe("the agent DaemonSet", Ordered, func() {
	key := client.ObjectKey{Namespace: testenv.OperatorNamespace, Name: agent.Name}
	getDS := func(g Gomega) *appsv1.DaemonSet {
		ds := &appsv1.DaemonSet{}
		g.Expect(k8s.Get(context.Background(), key, ds)).To(Succeed())
		return ds
	}

	It("is deployed: host network, NET_ADMIN and NET_RAW only, every taint tolerated, the operator's image", func() {
		Eventually(func(g Gomega) {
			ds := getDS(g)
			pod := ds.Spec.Template.Spec
			g.Expect(pod.HostNetwork).To(BeTrue())
			g.Expect(pod.ServiceAccountName).To(Equal(agent.ServiceAccount))
			g.Expect(pod.Tolerations).To(Equal([]corev1.Toleration{{Operator: corev1.TolerationOpExists}}))
			c := pod.Containers[0]
			g.Expect(c.Image).To(Equal("registry.example/vip-allocator:test"))
			g.Expect(c.Args).To(Equal([]string{"agent", "--node-name=$(NODE_NAME)", "--daemonset=vip-allocator-operator/vip-allocator-agent"}))
			g.Expect(*c.SecurityContext.Privileged).To(BeFalse())
			g.Expect(c.SecurityContext.Capabilities.Add).To(ConsistOf(corev1.Capability("NET_ADMIN"), corev1.Capability("NET_RAW")))
			g.Expect(c.SecurityContext.Capabilities.Drop).To(ConsistOf(corev1.Capability("ALL")))
		}).Should(Succeed())
	})

	It("gets a gossip key: a Secret of 32 random bytes the operator creates once and never rewrites", func() {
		secret := &corev1.Secret{}
		name := client.ObjectKey{Namespace: testenv.OperatorNamespace, Name: paasv1.MemberlistSecret}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(context.Background(), name, secret)).To(Succeed())
			g.Expect(secret.Data[paasv1.MemberlistKey]).NotTo(BeEmpty())
		}).Should(Succeed())
		gossipKey := secret.Data[paasv1.MemberlistKey]
		Expect(gossipKey).To(HaveLen(32))
		Expect(gossipKey).NotTo(Equal(make([]byte, 32)))
		// Reconciling again (the DaemonSet changes) keeps the key the agents use.
		ds := &appsv1.DaemonSet{}
		Expect(k8s.Get(context.Background(), key, ds)).To(Succeed())
		Expect(k8s.Delete(context.Background(), ds)).To(Succeed())
		Eventually(func(g Gomega) { getDS(g) }).Should(Succeed())
		Expect(k8s.Get(context.Background(), name, secret)).To(Succeed())
		Expect(secret.Data[paasv1.MemberlistKey]).To(Equal(gossipKey))
	})

	It("is recreated when deleted by hand, and repaired when edited", func() {
		ctx := context.Background()
		ds := getDS(Default)
		Expect(k8s.Delete(ctx, ds)).To(Succeed())
		Eventually(func(g Gomega) { g.Expect(getDS(g).UID).NotTo(Equal(ds.UID)) }).Should(Succeed())

		ds = getDS(Default)
		ds.Spec.Template.Spec.Containers[0].Image = "evil:latest"
		ds.Spec.Template.Spec.HostNetwork = false
		Expect(k8s.Update(ctx, ds)).To(Succeed())
		Eventually(func(g Gomega) {
			pod := getDS(g).Spec.Template.Spec
			g.Expect(pod.Containers[0].Image).To(Equal("registry.example/vip-allocator:test"))
			g.Expect(pod.HostNetwork).To(BeTrue())
		}).Should(Succeed())
	})

	It("follows --agent-node-selector, --agent-tolerations and --agent-args", func() {
		stopOperator()
		saved := operatorOptions
		DeferCleanup(func() { stopOperator(); operatorOptions = saved; runOperator() })
		operatorOptions.Agent.NodeSelector = map[string]string{"vip.paas.org/edge": "true"}
		operatorOptions.Agent.Tolerations = []corev1.Toleration{{Key: "edge", Operator: corev1.TolerationOpEqual, Value: "yes", Effect: corev1.TaintEffectNoSchedule}}
		operatorOptions.Agent.ExtraArgs = []string{"--dataplane=iptables"}
		runOperator()
		Eventually(func(g Gomega) {
			pod := getDS(g).Spec.Template.Spec
			g.Expect(pod.NodeSelector).To(Equal(map[string]string{"vip.paas.org/edge": "true"}))
			g.Expect(pod.Tolerations).To(HaveLen(1))
			g.Expect(pod.Tolerations[0].Key).To(Equal("edge"))
			g.Expect(pod.Containers[0].Args).To(HaveExactElements("agent", "--node-name=$(NODE_NAME)", "--daemonset=vip-allocator-operator/vip-allocator-agent", "--dataplane=iptables"))
		}).Should(Succeed())
	})
})

var _ = Describe("--ip-mode=VIP", Ordered, func() {
	It("writes ipMode VIP, so kube-proxy or the CNI keeps the VIP and the agent programs nothing", func() {
		stopOperator()
		saved := operatorOptions
		DeferCleanup(func() { stopOperator(); operatorOptions = saved; runOperator() })
		operatorOptions.IPMode = "VIP"
		runOperator()
		createIPGroup(newIPGroup("ipmode", "198.51.100.0/29"))
		svc := eventuallyIPs(createService(testenv.LoadBalancerService(newNamespace(nil), "vip-mode")), "198.51.100.0")
		Expect(svc.Status.LoadBalancer.Ingress[0].IPMode).To(HaveValue(Equal(corev1.LoadBalancerIPModeVIP)))
	})
})
