//go:build envtest

package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// manualGroup is a group only Services naming it use, so other specs'
// auto-assigned Services never take its addresses.
func manualGroup(name, segment string, excluded ...string) {
	g := newIPGroup(name, segment, excluded...)
	g.Spec.AutoAssign = new(false)
	createIPGroup(g)
}

var _ = Describe("dual stack", func() {
	It("takes one address per family from the groups vip.paas.org/ipgroup names, one per family", func() {
		manualGroup("dsn-v4", "10.254.6.0/24", "10.254.6.0")
		manualGroup("dsn-v6", "2001:db8:6::/64")
		ns := newNamespace(nil)

		both := createService(testenv.LoadBalancerService(ns, "both", withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol),
			withAnnotation(paasv1.IPGroupAnnotation, "dsn-v6,dsn-v4")))
		// 2001:db8:6:: is the subnet-router anycast address of its /64: skipped.
		eventuallyIPs(both, "10.254.6.1", "2001:db8:6::1")
		eventuallyCondition(both, metav1.ConditionTrue, paasv1.ReasonAllocated)
		Expect(ledger()).To(HaveKey("2001-db8-6--1"))

		By("an IPv6-first Service gets its addresses in its family order")
		v6first := createService(testenv.LoadBalancerService(ns, "v6first", withFamilies(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv6Protocol, corev1.IPv4Protocol),
			withAnnotation(paasv1.IPGroupAnnotation, "dsn-v4, dsn-v6")))
		eventuallyIPs(v6first, "2001:db8:6::2", "10.254.6.2")

		By("an address ending in :: gets a valid ledger name, and is freed with its Service")
		trailing := createService(testenv.LoadBalancerService(ns, "trailing", withFamilies(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol),
			withAnnotation(paasv1.IPsAnnotation, "2001:db8:6:0:1::")))
		eventuallyIPs(trailing, "2001:db8:6:0:1::")
		Expect(ledger()).To(HaveKey("2001-db8-6-0-1--0"), "a trailing :: is written with its zero: object names end in a letter or digit")
		Expect(k8s.Delete(context.Background(), trailing)).To(Succeed())
		Eventually(ledger).ShouldNot(HaveKey("2001-db8-6-0-1--0"))
	})

	It("refuses what cannot be had, and says how to fix it", func() {
		manualGroup("dsr-v4", "10.254.7.0/30")
		manualGroup("dsr-v6", "2001:db8:7::/126")
		ns := newNamespace(nil)

		By("RequireDualStack naming only an IPv4 group")
		half := createService(testenv.LoadBalancerService(ns, "half", withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol),
			withAnnotation(paasv1.IPGroupAnnotation, "dsr-v4")))
		c := eventuallyCondition(half, metav1.ConditionFalse, paasv1.ReasonNoIPGroup)
		Expect(c.Message).To(And(
			ContainSubstring("ipFamilyPolicy RequireDualStack needs an IPv4 and an IPv6 address, and only IPv4 was allocated"),
			ContainSubstring("none of the named IPGroups dsr-v4 is IPv6; name one IPv6 group per family in vip.paas.org/ipgroup"),
			ContainSubstring("or set ipFamilyPolicy PreferDualStack to be served by IPv4 alone"),
		))
		eventuallyEvent(half, corev1.EventTypeWarning, service.EventAllocationFailed, "RequireDualStack")

		By("the same Service as PreferDualStack is served by IPv4 and told why IPv6 is missing")
		prefer := createService(testenv.LoadBalancerService(ns, "prefer", withFamilies(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol),
			withAnnotation(paasv1.IPGroupAnnotation, "dsr-v4")))
		c = eventuallyCondition(prefer, metav1.ConditionTrue, paasv1.ReasonAllocated)
		Expect(c.Message).To(ContainSubstring("other family: none of the named IPGroups dsr-v4 is IPv6"))
		Expect(eventuallyHasIPs(prefer, 1)[0]).To(HavePrefix("10.254.7."))

		By("naming the IPv6 group too completes the RequireDualStack Service")
		editService(half, func(s *corev1.Service) { s.Annotations[paasv1.IPGroupAnnotation] = "dsr-v4,dsr-v6" })
		ips := eventuallyHasIPs(half, 2)
		Expect(addr(ips[0]).Is4() && addr(ips[1]).Is6()).To(BeTrue(), "IPv4 then IPv6, as spec.ipFamilies: %v", ips)
		eventuallyCondition(half, metav1.ConditionTrue, paasv1.ReasonAllocated)

		By("RequireDualStack when the IPv6 group is full")
		// dsr-v6 holds ::1-::3 (:: is the anycast address); half has one.
		for _, name := range []string{"fill-a", "fill-b"} {
			eventuallyHasIPs(createService(testenv.LoadBalancerService(ns, name, withFamilies(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol),
				withAnnotation(paasv1.IPGroupAnnotation, "dsr-v6"))), 1)
		}
		full := createService(testenv.LoadBalancerService(ns, "full", withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol),
			withAnnotation(paasv1.IPGroupAnnotation, "dsr-v4,dsr-v6")))
		c = eventuallyCondition(full, metav1.ConditionFalse, paasv1.ReasonIPGroupFull)
		Expect(c.Message).To(ContainSubstring("only IPv4 was allocated: no free IPv6 address in IPGroup dsr-v6"))

		By("requesting the subnet-router anycast address")
		anycast := createService(testenv.LoadBalancerService(ns, "anycast", withFamilies(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol),
			withAnnotation(paasv1.IPsAnnotation, "2001:db8:7::")))
		c = eventuallyCondition(anycast, metav1.ConditionFalse, paasv1.ReasonRequestedIPExcluded)
		Expect(c.Message).To(ContainSubstring("subnet-router anycast address"))
	})
})
