//go:build envtest

package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// Records of addresses in use on the LAN, the operator's side. The stand-in
// announcer (announcer_test.go) names a node as announcing every address a
// Service holds at once, so the verdict is written here on records, which no
// Service holds, as the agent of node-b writes it; the probe itself, and a
// Service moved off an address in use, are tested in test/e2e.
var _ = Describe("addresses in use on the LAN", func() {
	It("are given to no Service, across a restart, until the verdict is cleared or a person deletes the record", func() {
		ctx := context.Background()
		agent, err := client.New(env.AgentConfig("node-b"), client.Options{Scheme: paasv1.NewScheme()})
		Expect(err).NotTo(HaveOccurred())
		record := func(addr string, status metav1.ConditionStatus) {
			EventuallyWithOffset(1, func() error {
				ip := &paasv1.IP{}
				if err := agent.Get(ctx, client.ObjectKey{Name: addr}, ip); err != nil {
					return err
				}
				patch := client.MergeFrom(ip.DeepCopy())
				meta.SetStatusCondition(&ip.Status.Conditions, metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: status,
					Reason: paasv1.ReasonProbeAnswered, Message: "02:00:00:00:00:cc answered the ARP probe node node-b sent on eth0"})
				return agent.Status().Patch(ctx, ip, patch)
			}).Should(Succeed())
		}
		ns := newNamespace(nil)
		createIPGroup(newIPGroup("onlan", "198.51.100.248/29", "198.51.100.248", "198.51.100.255"))
		for _, addr := range []string{"198.51.100.249", "198.51.100.252"} {
			Expect(env.Operator.Create(ctx, &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: addr, Labels: map[string]string{paasv1.IPGroupLabel: "onlan"}},
				Spec: paasv1.IPSpec{Address: addr, IPGroup: "onlan"}})).To(Succeed())
			record(addr, metav1.ConditionTrue)
		}
		inGroup := withAnnotation(paasv1.IPGroupAnnotation, "onlan")
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "web", inGroup)), "198.51.100.250")

		asks := createService(testenv.LoadBalancerService(ns, "asks", inGroup, withAnnotation(paasv1.IPsAnnotation, "198.51.100.249")))
		c := eventuallyCondition(asks, metav1.ConditionFalse, paasv1.ReasonRequestedIPInUseOnLAN)
		Expect(c.Message).To(ContainSubstring("02:00:00:00:00:cc"))
		Expect(ingressIPs(getService(asks))).To(BeEmpty())
		eventuallyGroupStatus("onlan", func(g Gomega, s paasv1.IPGroupStatus) {
			g.Expect(s.InUseOnLAN).To(BeEquivalentTo(2))
			g.Expect(s.Allocated).To(BeEquivalentTo(1)) // web; the records hold nothing
			g.Expect(s.Available).To(Equal("3"))        // 6 - web - the two in use
		})

		By("across a restart, no one gets them")
		stopOperator()
		runOperator()
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "next", inGroup)), "198.51.100.251")
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "after", inGroup)), "198.51.100.253")
		eventuallyCondition(asks, metav1.ConditionFalse, paasv1.ReasonRequestedIPInUseOnLAN)

		By("a silent recheck clears the verdict: the record goes, the waiting Service gets the address")
		record("198.51.100.249", metav1.ConditionFalse)
		eventuallyIPs(asks, "198.51.100.249")
		Eventually(func(g Gomega) {
			ip := ledger()["198.51.100.249"]
			g.Expect(ip.Spec.Owner).NotTo(BeNil())
			g.Expect(ip.Spec.Owner.Name).To(Equal("asks"))
			g.Expect(meta.FindStatusCondition(ip.Status.Conditions, paasv1.IPConditionInUseOnLAN)).To(BeNil())
		}).Should(Succeed())
		eventuallyGroupStatus("onlan", func(g Gomega, s paasv1.IPGroupStatus) { g.Expect(s.InUseOnLAN).To(BeEquivalentTo(1)) })

		By("a person deletes the other record: the address is free")
		Expect(k8s.Delete(ctx, &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "198.51.100.252"}})).To(Succeed())
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "last", inGroup)), "198.51.100.252")
	})
})
