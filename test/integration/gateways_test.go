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
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// requestCondition creates a Service asking for addr in group and waits until
// it is pending with reason; it returns the condition's message.
func requestCondition(ns, name, group, addr, reason string) string {
	svc := createService(testenv.LoadBalancerService(ns, name, withAnnotation(paasv1.IPGroupAnnotation, group), withAnnotation(paasv1.IPsAnnotation, addr)))
	return eventuallyCondition(svc, metav1.ConditionFalse, reason).Message
}

var _ = Describe("the nodes' default gateways and the BGPPeers' addresses", func() {
	It("keeps a node's gateways out of new allocations in an L2 group, and a gateway claim of a held address takes nothing from its Service", func() {
		g := newIPGroup("gw-lan", "10.242.0.0/24")
		g.Spec.AutoAssign = new(false)
		createIPGroup(g)
		ns := newNamespace(nil)
		held := createService(testenv.LoadBalancerService(ns, "held", withAnnotation(paasv1.IPsAnnotation, "10.242.0.20")))
		eventuallyIPs(held, "10.242.0.20")

		By("a node's agent publishes the router at .1 and the Service's address as its default gateways")
		node := reservedNode("gw-node", []string{"10.242.0.250"}, nil, `[{"name":"eth0","addrs":["10.242.0.250/24"],"gateways":["10.242.0.1","10.242.0.20"]}]`)
		Eventually(ledgerClaimedBy("10.242.0.20")).Should(Equal("gw-node"))
		eventuallyEvent(node, corev1.EventTypeWarning, paasv1.EventClaimsServiceAddress,
			"Node gw-node lists 10.242.0.20 as its own (the default gateway of Node gw-node on eth0)")
		Consistently(func(g Gomega) {
			got := getService(held)
			g.Expect(ingressIPs(got)).To(Equal([]string{"10.242.0.20"}))
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, paasv1.ConditionAddressConflict)).To(BeNil())
			g.Expect(ledgerReservedBy("10.242.0.20")()).To(BeEmpty())
		}, 2*time.Second).Should(Succeed())

		By("the next Service of the group skips the network address and the gateway")
		next := createService(testenv.LoadBalancerService(ns, "next", withAnnotation(paasv1.IPGroupAnnotation, "gw-lan")))
		eventuallyIPs(next, "10.242.0.2")

		By("a Service asking for the gateway stays pending with the reason")
		Expect(requestCondition(ns, "asks-gw", "gw-lan", "10.242.0.1", paasv1.ReasonRequestedIPReserved)).
			To(ContainSubstring("10.242.0.1 is the default gateway of Node gw-node on eth0"))

		By("the node's default route changes: the address is free again")
		cur := &corev1.Node{}
		Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(node), cur)).To(Succeed())
		patch := client.MergeFrom(cur.DeepCopy())
		cur.Annotations[paasv1.NodeInterfacesAnnotation] = `[{"name":"eth0","addrs":["10.242.0.250/24"],"gateways":["10.242.0.254"]}]`
		Expect(k8s.Patch(context.Background(), cur, patch)).To(Succeed())
		Eventually(ledgerClaimedBy("10.242.0.20")).Should(BeEmpty())
		eventuallyIPs(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "asks-gw"}}, "10.242.0.1")
	})

	It("reserves every BGPPeer's address in a BGP group but not a node's gateway (a node's claims count on layer 2 only), and a peer created at a held address is the Service's conflict", func() {
		g := newIPGroup("gw-bgp", "10.243.0.0/24")
		g.Spec.AutoAssign = new(false)
		g.Spec.Announce = &paasv1.Announce{Mode: paasv1.AnnounceBGP}
		createIPGroup(g)
		ns := newNamespace(nil)
		held := createService(testenv.LoadBalancerService(ns, "held", withAnnotation(paasv1.IPsAnnotation, "10.243.0.9")))
		eventuallyIPs(held, "10.243.0.9")

		By("a router peered at .0, a node whose default gateway is .1")
		peer := newBGPPeer("gw-tor", func(s *paasv1.BGPPeerSpec) { s.PeerAddress = "10.243.0.0" })
		Expect(k8s.Create(context.Background(), peer)).To(Succeed())
		DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), peer))).To(Succeed()) })
		reservedNode("gw-bgp-node", []string{"10.243.0.250"}, nil, `[{"name":"eth0","addrs":["10.243.0.250/24"],"gateways":["10.243.0.1"]}]`)
		// .0 the peer's, .250 the Node's status address; not the gateway.
		eventuallyGroupStatus("gw-bgp", func(g Gomega, s paasv1.IPGroupStatus) { g.Expect(s.Reserved).To(Equal("2")) })

		By("the next Service gets the node's gateway .1; one asking for the peer's address stays pending with the reason")
		next := createService(testenv.LoadBalancerService(ns, "next", withAnnotation(paasv1.IPGroupAnnotation, "gw-bgp")))
		eventuallyIPs(next, "10.243.0.1")
		Expect(requestCondition(ns, "asks-peer", "gw-bgp", "10.243.0.0", paasv1.ReasonRequestedIPReserved)).
			To(ContainSubstring("10.243.0.0 is the address of BGPPeer gw-tor"))

		By("the peer moved onto the held address: an admin wrote it, so the Service's conflict, and .0 is free again")
		cur := &paasv1.BGPPeer{}
		Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(peer), cur)).To(Succeed())
		cur.Spec.PeerAddress = "10.243.0.9"
		Expect(k8s.Update(context.Background(), cur)).To(Succeed())
		Expect(conflictCondition(held, paasv1.ReasonReservedByBGPPeer).Message).To(ContainSubstring("10.243.0.9 is the address of BGPPeer gw-tor"))
		Eventually(ledgerReservedBy("10.243.0.9")).Should(Equal("the address of BGPPeer gw-tor"))
		eventuallyIPs(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "asks-peer"}}, "10.243.0.0")
	})
})
