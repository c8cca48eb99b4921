//go:build envtest

package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// A group from which Services hold addresses is protected like a PVC: deleting,
// shrinking or excluding never moves a Service on its own.
var _ = Describe("group protection", func() {
	It("keeps a deleted IPGroup Terminating while Services hold its addresses, moves them once released, and keeps those a covering group still allows", func() {
		ctx := context.Background()
		oldSite := createIPGroup(newIPGroup("old-site", "198.51.100.128/28"))
		narrow := createIPGroup(newIPGroup("narrow", "192.0.2.160/28"))
		ns := newNamespace(nil)
		x := createService(testenv.LoadBalancerService(ns, "x", withAnnotation(paasv1.IPGroupAnnotation, "old-site,new-site")))
		eventuallyIPs(x, "198.51.100.128")
		y := createService(testenv.LoadBalancerService(ns, "y", withAnnotation(paasv1.IPGroupAnnotation, "old-site,new-site")))
		eventuallyIPs(y, "198.51.100.129")
		z := createService(testenv.LoadBalancerService(ns, "z", withAnnotation(paasv1.IPsAnnotation, "192.0.2.170")))
		eventuallyIPs(z, "192.0.2.170")
		check := watchInvariants(ns)
		Eventually(func(g Gomega) {
			var group paasv1.IPGroup
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(oldSite), &group)).To(Succeed())
			g.Expect(group.Finalizers).To(ContainElement(paasv1.AddressesHeldFinalizer))
		}).Should(Succeed(), "a group Services hold addresses from is protected")

		By("deleting a group Services hold addresses from: it stays Terminating, they keep their addresses, and both say so")
		Expect(k8s.Delete(ctx, oldSite)).To(Succeed())
		kept := eventuallyKept("old-site", paasv1.ReasonDeletionBlocked)
		Expect(kept.Message).To(Equal("the IPGroup is being deleted and 2 Service(s) still hold its addresses: " + ns + "/x (198.51.100.128), " + ns + "/y (198.51.100.129); they keep them, announced, until you set vip.paas.org/release-addresses=true on the IPGroup to move them to other groups, or delete them"))
		var terminating paasv1.IPGroup
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(oldSite), &terminating)).To(Succeed())
		Expect(terminating.DeletionTimestamp).NotTo(BeNil())
		c := eventuallyCondition(x, metav1.ConditionTrue, paasv1.ReasonAddressKept)
		Expect(c.Message).To(ContainSubstring("keeps 198.51.100.128, which IPGroup old-site no longer allows"))
		Expect(ledger()["198.51.100.128"].Labels).To(HaveKeyWithValue(paasv1.IPGroupLabel, "old-site"), "the agents still find the group through the ledger")
		Consistently(func(g Gomega) {
			announced := meta.FindStatusCondition(getService(x).Status.Conditions, paasv1.ConditionAnnounced)
			g.Expect(announced).NotTo(BeNil())
			g.Expect(announced.Reason).To(Equal(paasv1.ReasonAnnounced), announced.Message)
		}, "1s").Should(Succeed(), "still announced from the Terminating group")

		By("a group that could take them over does not move them either")
		createIPGroup(newIPGroup("new-site", "203.0.113.128/28"))
		Consistently(func() []string { return append(ingressIPs(getService(x)), ingressIPs(getService(y))...) }, "1s").
			Should(Equal([]string{"198.51.100.128", "198.51.100.129"}))

		By("released: they move to the other group, and the deleted group goes")
		releaseAddresses("old-site")
		Eventually(func(g Gomega) {
			g.Expect(append(ingressIPs(getService(x)), ingressIPs(getService(y))...)).To(ConsistOf("203.0.113.128", "203.0.113.129"))
		}).Should(Succeed())
		eventuallyCondition(x, metav1.ConditionTrue, paasv1.ReasonAllocated)
		Eventually(ledger).ShouldNot(HaveKey("198.51.100.128"))
		Eventually(ledger).ShouldNot(HaveKey("198.51.100.129"))
		eventuallyGone("old-site")

		By("a group whose segment covers the deleted one's: the Service keeps its IP, the ledger names the new group, and the deleted group goes")
		createIPGroup(newIPGroup("wide", "192.0.2.128/25"))
		Expect(k8s.Delete(ctx, narrow)).To(Succeed())
		Eventually(func(g Gomega) {
			g.Expect(ledger()["192.0.2.170"].Labels).To(HaveKeyWithValue(paasv1.IPGroupLabel, "wide"))
			g.Expect(ledger()["192.0.2.170"].Spec.IPGroup).To(Equal("wide"))
		}).Should(Succeed())
		eventuallyGone("narrow")
		Expect(ingressIPs(getService(z))).To(Equal([]string{"192.0.2.170"}))
		c = eventuallyCondition(z, metav1.ConditionTrue, paasv1.ReasonAllocated)
		Expect(c.Message).To(Equal("holds 192.0.2.170 from IPGroup wide"))
		Expect(check()).To(BeEmpty())
	})

	It("deletes a group no Service holds an address from at once", func() {
		ctx := context.Background()
		idle := createIPGroup(newIPGroup("idle", "198.51.100.224/28"))
		ns := newNamespace(nil)
		gone := createService(testenv.LoadBalancerService(ns, "gone", withAnnotation(paasv1.IPGroupAnnotation, "idle")))
		eventuallyIPs(gone, "198.51.100.224")
		Expect(k8s.Delete(ctx, getService(gone))).To(Succeed())
		Eventually(ledger).ShouldNot(HaveKey("198.51.100.224"))

		Expect(k8s.Delete(ctx, idle)).To(Succeed())
		eventuallyGone("idle")
		never := createIPGroup(newIPGroup("never-held", "198.51.100.240/28"))
		Expect(k8s.Delete(ctx, never)).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(never), &paasv1.IPGroup{}))
		}, "2s", "20ms").Should(BeTrue(), "a group nobody ever held from has no finalizer")
	})

	It("keeps Services on addresses a shrunk segment leaves out, and reports them until the admin acts", func() {
		ctx := context.Background()
		createIPGroup(newIPGroup("shrink", "203.0.113.160/28", "203.0.113.160/29"))
		ns := newNamespace(nil)
		named := withAnnotation(paasv1.IPGroupAnnotation, "shrink")
		s0 := createService(testenv.LoadBalancerService(ns, "s0", named))
		eventuallyIPs(s0, "203.0.113.168")
		s1 := createService(testenv.LoadBalancerService(ns, "s1", named))
		eventuallyIPs(s1, "203.0.113.169")

		editIPGroup("shrink", func(g *paasv1.IPGroup) { g.Spec.Segment, g.Spec.ExcludedIPs = "203.0.113.160/29", nil })
		kept := eventuallyKept("shrink", paasv1.ReasonKeptUntilReleased)
		Expect(kept.Message).To(HavePrefix("2 Service(s) keep addresses the group no longer allows (segment, addresses or excludedIPs changed): " +
			ns + "/s0 (203.0.113.168), " + ns + "/s1 (203.0.113.169);"))
		c := eventuallyCondition(s1, metav1.ConditionTrue, paasv1.ReasonAddressKept)
		Expect(c.Message).To(ContainSubstring("keeps 203.0.113.169, which IPGroup shrink no longer allows"))
		eventuallyEvent(s1, corev1.EventTypeWarning, service.EventAddressKept, "keeps 203.0.113.169")
		Consistently(func() []string { return append(ingressIPs(getService(s0)), ingressIPs(getService(s1))...) }, "1s").
			Should(Equal([]string{"203.0.113.168", "203.0.113.169"}))

		By("the admin removes one Service: the report names the other")
		Expect(k8s.Delete(ctx, getService(s0))).To(Succeed())
		Eventually(func() string { return eventuallyKept("shrink", paasv1.ReasonKeptUntilReleased).Message }).
			Should(HavePrefix("1 Service(s) keep addresses the group no longer allows (segment, addresses or excludedIPs changed): " + ns + "/s1 (203.0.113.169);"))

		By("and releases the rest: it moves into the segment, and the report clears")
		releaseAddresses("shrink")
		eventuallyIPs(s1, "203.0.113.160")
		eventuallyEvent(s1, corev1.EventTypeNormal, service.EventIPChanged, "Changed 203.0.113.169 → 203.0.113.160 (IPGroup shrink)")
		eventuallyKept("shrink", paasv1.ReasonNoneKept)
		eventuallyRelocating("shrink", 0)
	})
})
