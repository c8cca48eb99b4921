//go:build envtest

package integration

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// createServices creates n LoadBalancer Services named prefix-i, 16 at a time.
func createServices(ns, prefix string, from, to int) {
	inParallel(to-from, func(i int) {
		Expect(k8s.Create(context.Background(), testenv.LoadBalancerService(ns, fmt.Sprintf("%s-%d", prefix, from+i)))).To(Succeed())
	})
}

// holdings maps each Service holding addresses to them.
func holdings(ns string) map[string][]string {
	var list corev1.ServiceList
	ExpectWithOffset(1, k8s.List(context.Background(), &list, client.InNamespace(ns))).To(Succeed())
	out := map[string][]string{}
	for _, s := range list.Items {
		if ips := ingressIPs(&s); len(ips) > 0 {
			out[s.Name] = ips
		}
	}
	return out
}

// expectConsistent checks no address is held twice and the ledger says exactly
// what the statuses say.
func expectConsistent(g Gomega, ns string, held map[string][]string) {
	owner := map[string]string{}
	for svc, ips := range held {
		for _, ip := range ips {
			g.Expect(owner).NotTo(HaveKey(ip), "%s held by %s and %s", ip, owner[ip], svc)
			owner[ip] = svc
		}
	}
	var list paasv1.IPList
	g.Expect(k8s.List(context.Background(), &list)).To(Succeed())
	inLedger := map[string]string{}
	for _, ip := range list.Items {
		if ip.Spec.Owner != nil && ip.Spec.Owner.Namespace == ns {
			inLedger[ip.Spec.Address] = ip.Spec.Owner.Name
		}
	}
	g.Expect(inLedger).To(Equal(owner))
}

var _ = Describe("operator restarts", Ordered, func() {
	It("never moves or doubles an IP when stopped mid-churn, and serves the pending after the rebuild", func() {
		const total = 1200
		createIPGroup(newIPGroup("churn", "10.200.0.0/16"))
		ns := newNamespace(nil)

		By("stopping the operator while it allocates")
		go createServices(ns, "svc", 0, total)
		Eventually(func() int { return len(holdings(ns)) }, "120s").Should(BeNumerically(">=", total/4))
		stopOperator()
		before := holdings(ns)
		GinkgoWriter.Printf("stopped with %d of %d served\n", len(before), total)
		Expect(len(before)).To(BeNumerically("<", total), "the stop must land mid-churn")

		By("churning while it is down: deletions, and new Services")
		for i := range 50 {
			name := fmt.Sprintf("svc-%d", i)
			Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), testenv.LoadBalancerService(ns, name)))).To(Succeed())
			delete(before, name)
		}
		createServices(ns, "late", 0, 100)

		By("restarting, and stopping again at once")
		runOperator()
		Eventually(func() int { return len(holdings(ns)) }, "120s").Should(BeNumerically(">", len(before)+50))
		stopOperator()
		runOperator()

		By("every Service ends served, none moved, none doubled")
		Eventually(func(g Gomega) {
			held := holdings(ns)
			g.Expect(held).To(HaveLen(total - 50 + 100))
			expectConsistent(g, ns, held)
		}, "180s", "1s").Should(Succeed())
		after := holdings(ns)
		for name, ips := range before {
			Expect(after[name]).To(Equal(ips), "Service %s changed IP across the restart", name)
		}
		deleteAllServices(ns)
	})
})
