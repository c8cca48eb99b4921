//go:build envtest

package integration

import (
	"context"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

func ledgerClaimedBy(name string) func() string {
	return func() string {
		var ip paasv1.IP
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, &ip); err != nil {
			return "error: " + err.Error()
		}
		return ip.Annotations[paasv1.ClaimedByAnnotation]
	}
}

var _ = Describe("a Node whose agent claims a Service's address", func() {
	It("leaves the Service its address, unreserved, names the node on the ledger with a Warning Event on the Node, and keeps a free claimed address out of new allocations", func() {
		ctx := context.Background()
		g := newIPGroup("clm-lan", "10.241.0.0/24")
		g.Spec.AutoAssign = new(false)
		createIPGroup(g)
		ns := newNamespace(nil)
		svc := createService(testenv.LoadBalancerService(ns, "held", withAnnotation(paasv1.IPsAnnotation, "10.241.0.20")))
		eventuallyIPs(svc, "10.241.0.20")

		By("the agent of a node lists the Service's address, and a free one, among the node's own")
		node := reservedNode("clm-evil", []string{"10.241.0.250"}, nil, `[{"name":"eth0","addrs":["10.241.0.250/24","10.241.0.20/32","10.241.0.21/32"]}]`)
		Eventually(ledgerClaimedBy("10.241.0.20")).Should(Equal("clm-evil"))
		eventuallyEvent(node, corev1.EventTypeWarning, paasv1.EventClaimsServiceAddress,
			"Node clm-evil lists 10.241.0.20 as its own (the address of Node clm-evil on eth0) but the ledger (IP 10.241.0.20) gives it to Service "+ns+"/held")
		Consistently(func(g Gomega) {
			got := getService(svc)
			g.Expect(ingressIPs(got)).To(Equal([]string{"10.241.0.20"}))
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, paasv1.ConditionAddressConflict)).To(BeNil())
			g.Expect(ledgerReservedBy("10.241.0.20")()).To(BeEmpty())
		}, 2*time.Second).Should(Succeed())
		eventuallyCondition(svc, metav1.ConditionTrue, paasv1.ReasonAllocated)

		By("a free address the node claims is not handed out")
		asks := createService(testenv.LoadBalancerService(ns, "asks", withAnnotation(paasv1.IPsAnnotation, "10.241.0.21")))
		eventuallyCondition(asks, metav1.ConditionFalse, paasv1.ReasonRequestedIPReserved)

		By("the claim withdrawn: the ledger no longer names the node")
		cur := &corev1.Node{}
		Expect(k8s.Get(ctx, client.ObjectKeyFromObject(node), cur)).To(Succeed())
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Annotations[paasv1.NodeInterfacesAnnotation] = `[{"name":"eth0","addrs":["10.241.0.250/24"]}]`
		Expect(k8s.Patch(ctx, cur, patch)).To(Succeed())
		Eventually(ledgerClaimedBy("10.241.0.20")).Should(BeEmpty())
		eventuallyIPs(asks, "10.241.0.21")
	})
})
