//go:build envtest

package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

var _ = Describe("a released requested address", func() {
	It("is kept for the Service that asked for it through a delete and create, then goes to the waiter", func() {
		const grace = 8 * time.Second
		stopOperator()
		saved := operatorOptions
		DeferCleanup(func() { stopOperator(); operatorOptions = saved; runOperator() })
		operatorOptions.ReleasedGrace = grace
		runOperator()

		createIPGroup(newIPGroup("lease", "203.0.113.64/29"))
		owners, others := newNamespace(nil), newNamespace(nil)
		owner := func() *corev1.Service {
			return testenv.LoadBalancerService(owners, "web", withLoadBalancerIP("203.0.113.66"))
		}
		eventuallyIPs(createService(owner()), "203.0.113.66")

		By("another tenant's Service waits for it, told it is in use without the holder's name")
		waiter := createService(testenv.LoadBalancerService(others, "wants", withAnnotation(paasv1.IPsAnnotation, "203.0.113.66")))
		c := eventuallyCondition(waiter, metav1.ConditionFalse, paasv1.ReasonRequestedIPInUse)
		Expect(c.Message).To(ContainSubstring("held by a Service in another namespace"))
		Expect(c.Message).NotTo(ContainSubstring(owners))

		By("the owner is deleted: the waiter is told the address is kept, not for whom")
		deleteAndWait(owner())
		c = eventuallyCondition(waiter, metav1.ConditionFalse, paasv1.ReasonRequestedIPLeased)
		Expect(c.Message).To(ContainSubstring("until "))
		Expect(c.Message).NotTo(ContainSubstring(owners))

		By("the owner, created again within the grace, gets it back")
		eventuallyIPs(createService(owner()), "203.0.113.66")
		eventuallyCondition(waiter, metav1.ConditionFalse, paasv1.ReasonRequestedIPInUse)
		Expect(ingressIPs(getService(waiter))).To(BeEmpty())

		By("deleted for good: the waiter gets it once the grace is over, not before")
		deleteAndWait(owner())
		released := time.Now()
		eventuallyCondition(waiter, metav1.ConditionFalse, paasv1.ReasonRequestedIPLeased)
		Consistently(func() []string { return ingressIPs(getService(waiter)) }, grace/2).Should(BeEmpty())
		Eventually(func() []string { return ingressIPs(getService(waiter)) }, grace+20*time.Second).Should(Equal([]string{"203.0.113.66"}))
		Expect(time.Since(released)).To(BeNumerically(">=", grace-time.Second))
	})
})

// deleteAndWait deletes the Service and waits until it is gone: the operator
// has released its addresses and removed its cleanup finalizer.
func deleteAndWait(s client.Object) {
	ctx := context.Background()
	ExpectWithOffset(1, k8s.Delete(ctx, s)).To(Succeed())
	EventuallyWithOffset(1, func() error { return k8s.Get(ctx, client.ObjectKeyFromObject(s), s) }).Should(MatchError(ContainSubstring("not found")))
}
