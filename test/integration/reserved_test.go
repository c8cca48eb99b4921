//go:build envtest

package integration

import (
	"context"
	"net/netip"
	"strings"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// An address only goes where it is safe.

var _ = Describe("IPGroups that can never be safe", func() {
	DescribeTable("are refused by the API server with a message naming the problem",
		func(name, segment, message string) {
			err := k8s.Create(context.Background(), newIPGroup(name, segment))
			if err == nil {
				_ = k8s.Delete(context.Background(), newIPGroup(name, segment))
			}
			Expect(err).To(HaveOccurred(), "segment %s was accepted", segment)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("all of IPv4", "bad-all4", "0.0.0.0/0", "segment 0.0.0.0/0 is too wide to be a VIP pool: the shortest prefix is /8 for IPv4 and /16 for IPv6"),
		Entry("all of IPv6", "bad-all6", "::/0", "segment ::/0 is too wide to be a VIP pool"),
		Entry("the unspecified block", "bad-zero", "0.0.0.0/8", "segment 0.0.0.0/8 holds the unspecified address"),
		Entry("the IPv6 unspecified address", "bad-zero6", "::/128", "segment ::/128 holds the unspecified address"),
		Entry("loopback", "bad-loop", "127.0.0.0/8", "segment 127.0.0.0/8 holds loopback addresses"),
		Entry("IPv6 loopback", "bad-loop6", "::1/128", "segment ::1/128 holds loopback addresses"),
		Entry("multicast", "bad-mcast", "224.0.0.0/4", "segment 224.0.0.0/4 holds multicast addresses"),
		Entry("one multicast /24", "bad-mcast24", "224.0.0.0/24", "segment 224.0.0.0/24 holds multicast addresses"),
		Entry("IPv6 multicast", "bad-mcast6", "ff02::/16", "segment ff02::/16 holds multicast addresses"),
		Entry("link-local", "bad-ll", "169.254.0.0/16", "segment 169.254.0.0/16 holds link-local addresses"),
		Entry("a /8 around link-local", "bad-ll8", "169.0.0.0/8", "segment 169.0.0.0/8 holds link-local addresses"),
		Entry("the cloud metadata address", "bad-meta", "169.254.169.254/32", "holds link-local addresses"),
		Entry("IPv6 link-local", "bad-ll6", "fe80::/64", "segment fe80::/64 holds link-local addresses"),
		Entry("limited broadcast", "bad-bcast", "255.255.255.255/32", "segment 255.255.255.255/32 holds the limited broadcast address"),
		Entry("IPv4-mapped IPv6", "bad-mapped", "::ffff:192.0.2.0/120", "IPv4-mapped IPv6"),
		Entry("shorter than /8", "bad-wide", "10.0.0.0/7", "segment 10.0.0.0/7 is too wide to be a VIP pool"),
		Entry("shorter than /16 (IPv6)", "bad-wide6", "2001::/15", "segment 2001::/15 is too wide to be a VIP pool"),
		Entry("a name longer than a label value", strings.Repeat("n", 64), "192.0.2.0/24", "an IPGroup name is at most 63 characters"),
	)

	It("accepts the widest safe pools and a 63-character name", func() {
		for _, g := range []*paasv1.IPGroup{
			newIPGroup("ok-slash8", "10.0.0.0/8"),
			newIPGroup("ok-slash16", "2001::/16"),
			newIPGroup(strings.Repeat("n", 63), "203.0.113.0/24"),
		} {
			createIPGroup(g)
		}
	})
})

// reservedNode creates a Node with the given status addresses, pod CIDRs and
// published interfaces (what the kubelet, the node IPAM and the agent write),
// and deletes it at the end.
func reservedNode(name string, internalIPs, podCIDRs []string, interfaces string) *corev1.Node {
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{PodCIDRs: podCIDRs}}
	if len(podCIDRs) > 0 {
		n.Spec.PodCIDR = podCIDRs[0]
	}
	if interfaces != "" {
		n.Annotations = map[string]string{paasv1.NodeInterfacesAnnotation: interfaces}
	}
	Expect(k8s.Create(ctx, n)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), n))).To(Succeed()) })
	for _, ip := range internalIPs {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: ip})
	}
	if len(internalIPs) > 0 {
		Expect(k8s.Status().Update(ctx, n)).To(Succeed())
	}
	return n
}

// conflictCondition waits until the Service's vip.paas.org/AddressConflict
// condition is present (want non-empty: its reason) or absent (want empty).
func conflictCondition(s *corev1.Service, wantReason string) *metav1.Condition {
	var c *metav1.Condition
	EventuallyWithOffset(1, func(g Gomega) {
		got := &corev1.Service{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(s), got)).To(Succeed())
		c = meta.FindStatusCondition(got.Status.Conditions, paasv1.ConditionAddressConflict)
		if wantReason == "" {
			g.Expect(c).To(BeNil())
			return
		}
		g.Expect(c).NotTo(BeNil())
		g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
		g.Expect(c.Reason).To(Equal(wantReason), c.Message)
	}).Should(Succeed())
	return c
}

func ledgerReservedBy(name string) func() string {
	return func() string {
		var ip paasv1.IP
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, &ip); err != nil {
			return "error: " + err.Error()
		}
		return ip.Spec.ReservedBy
	}
}

var _ = Describe("reserved addresses", func() {
	It("refuses requests for a Node's address, a pod CIDR, a node subnet's broadcast address and the API Service's address, skips them when choosing, and counts them", func() {
		ctx := context.Background()
		// node1: pod CIDR 203.0.113.0/29, address .8, its agent publishes eth0 203.0.113.9/24.
		reservedNode("rsv-node1", []string{"203.0.113.8"}, []string{"203.0.113.0/29"}, `[{"name":"eth0","addrs":["203.0.113.9/24"]}]`)
		lan := newIPGroup("rsv-lan", "203.0.113.0/24")
		lan.Spec.AutoAssign = new(false)
		createIPGroup(lan)
		svcRange := newIPGroup("rsv-svc", "10.96.0.0/24") // inside the cluster's Service CIDR 10.96.0.0/16
		svcRange.Spec.AutoAssign = new(false)
		createIPGroup(svcRange)
		ns := newNamespace(nil)

		for _, tc := range []struct{ name, ip, message string }{
			{"node-address", "203.0.113.8", "requested 203.0.113.8 is the address of Node rsv-node1, reserved in the cluster and never handed out; request another address"},
			{"node-interface", "203.0.113.9", "requested 203.0.113.9 is the address of Node rsv-node1 on eth0, reserved in the cluster"},
			{"pod-cidr", "203.0.113.3", "requested 203.0.113.3 is in the pod CIDR 203.0.113.0/29 of Node rsv-node1, reserved in the cluster"},
			{"broadcast", "203.0.113.255", "requested 203.0.113.255 is the broadcast address of subnet 203.0.113.0/24 (Node rsv-node1, eth0), reserved in the cluster"},
			{"api-service", "10.96.0.1", "requested 10.96.0.1 is in the Service CIDR 10.96.0.0/16 (ServiceCIDR kubernetes), reserved in the cluster"},
		} {
			By("requesting " + tc.ip + " (" + tc.name + ")")
			svc := createService(testenv.LoadBalancerService(ns, tc.name, withAnnotation(paasv1.IPsAnnotation, tc.ip)))
			c := eventuallyCondition(svc, metav1.ConditionFalse, paasv1.ReasonRequestedIPReserved)
			Expect(c.Message).To(HavePrefix(tc.message))
			eventuallyEvent(svc, corev1.EventTypeWarning, service.EventAllocationFailed, tc.message)
			Expect(ingressIPs(getService(svc))).To(BeEmpty())
			Expect(ledger()).NotTo(HaveKey(tc.ip))
		}

		By("choosing the first address that is neither reserved nor taken")
		auto := createService(testenv.LoadBalancerService(ns, "auto", withAnnotation(paasv1.IPGroupAnnotation, "rsv-lan")))
		eventuallyIPs(auto, "203.0.113.10")
		full := createService(testenv.LoadBalancerService(ns, "svc-range", withAnnotation(paasv1.IPGroupAnnotation, "rsv-svc")))
		eventuallyCondition(full, metav1.ConditionFalse, paasv1.ReasonIPGroupFull)

		By("counting the reserved addresses on the groups")
		Eventually(func(g Gomega) {
			var group paasv1.IPGroup
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "rsv-lan"}, &group)).To(Succeed())
			// .0-.7 (pod CIDR, .0 also the subnet's network address), .8, .9 (the node), .255 (broadcast)
			g.Expect(group.Status.Reserved).To(Equal("11"))
			g.Expect(group.Status.Capacity).To(Equal("256"))
			g.Expect(group.Status.Allocated).To(BeEquivalentTo(1))
			g.Expect(group.Status.Available).To(Equal("244"))
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "rsv-svc"}, &group)).To(Succeed())
			g.Expect(group.Status.Reserved).To(Equal("256"))
			g.Expect(group.Status.Available).To(Equal("0"))
		}).Should(Succeed())
	})

	It("lets a Service keep an address a Node turns up with later: that Node's conflict, named on the ledger with a Warning Event on the Node, never the Service's; a free address a Node lists is never handed out", func() {
		ctx := context.Background()
		lan := newIPGroup("rsv-late", "198.51.100.0/24", "198.51.100.0", "198.51.100.255")
		lan.Spec.AutoAssign = new(false)
		createIPGroup(lan)
		ns := newNamespace(nil)
		svc := createService(testenv.LoadBalancerService(ns, "holder", withAnnotation(paasv1.IPsAnnotation, "198.51.100.20")))
		eventuallyIPs(svc, "198.51.100.20")
		conflictCondition(svc, "")

		By("a Node joins with the Service's address and a free one in its status.addresses")
		node := reservedNode("rsv-late-node", []string{"198.51.100.20", "198.51.100.21"}, nil, "")
		Eventually(ledgerClaimedBy("198.51.100.20")).Should(Equal("rsv-late-node"))
		eventuallyEvent(node, corev1.EventTypeWarning, paasv1.EventClaimsServiceAddress,
			"Node rsv-late-node lists 198.51.100.20 as its own (the address of Node rsv-late-node) but the ledger (IP 198.51.100.20) gives it to Service "+ns+"/holder")
		Consistently(func(g Gomega) {
			got := getService(svc)
			g.Expect(ingressIPs(got)).To(Equal([]string{"198.51.100.20"}))
			g.Expect(meta.FindStatusCondition(got.Status.Conditions, paasv1.ConditionAddressConflict)).To(BeNil())
			g.Expect(ledgerReservedBy("198.51.100.20")()).To(BeEmpty())
		}, 2*time.Second).Should(Succeed())
		eventuallyCondition(svc, metav1.ConditionTrue, paasv1.ReasonAllocated)
		Expect(requestCondition(ns, "asks-free", "rsv-late", "198.51.100.21", paasv1.ReasonRequestedIPReserved)).
			To(ContainSubstring("198.51.100.21 is the address of Node rsv-late-node"))

		By("the Node leaves")
		Expect(k8s.Delete(ctx, node)).To(Succeed())
		Eventually(ledgerClaimedBy("198.51.100.20")).Should(BeEmpty())
		eventuallyIPs(svc, "198.51.100.20")
		eventuallyIPs(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "asks-free"}}, "198.51.100.21")
	})
})

var _ = Describe("a restart with a status the ledger contradicts", Ordered, func() {
	It("keeps the address for the Service the ledger names, not the one whose status shows it", func() {
		ctx := context.Background()
		g := newIPGroup("rsv-restart", "198.51.100.0/28")
		g.Spec.AutoAssign = new(false)
		createIPGroup(g)
		ns := newNamespace(nil)
		// The older Service is imported first at a start: if status won over the
		// ledger, the forged address below would be its.
		older := createService(testenv.LoadBalancerService(ns, "older", withAnnotation(paasv1.IPGroupAnnotation, "rsv-restart")))
		eventuallyIPs(older, "198.51.100.0")
		holder := createService(testenv.LoadBalancerService(ns, "holder", withAnnotation(paasv1.IPGroupAnnotation, "rsv-restart")))
		eventuallyIPs(holder, "198.51.100.1")

		By("stopping the operator and writing the holder's address into the older Service's status")
		stopOperator()
		DeferCleanup(func() {
			if stopOp == nil {
				runOperator()
			}
		})
		forged := getService(older)
		patch := client.MergeFrom(forged.DeepCopy())
		forged.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: "198.51.100.1"}}
		Expect(env.Operator.Status().Patch(ctx, forged, patch)).To(Succeed())

		By("restarting: the ledger wins")
		runOperator()
		eventuallyIPs(older, "198.51.100.0")
		Consistently(func() []string { return ingressIPs(getService(holder)) }, "2s").Should(Equal([]string{"198.51.100.1"}))
		Expect(ledger()["198.51.100.1"].Spec.Owner.Name).To(Equal("holder"))
	})
})

var _ = Describe("overlapping groups with selectors", func() {
	It("never gives a namespace an address of a segment whose group's selectors exclude it, also not through an overlapping group", func() {
		shared := newIPGroup("ten-shared", "192.0.2.0/24")
		shared.Spec.AutoAssign = new(false)
		createIPGroup(shared)
		team := newIPGroup("ten-team", "192.0.2.0/28")
		team.Spec.AutoAssign = new(false)
		team.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}}
		createIPGroup(team)
		other := newNamespace(nil)
		teamA := newNamespace(map[string]string{"team": "a"})

		By("another namespace's Service skips the team's part of the shared group")
		first := createService(testenv.LoadBalancerService(other, "first", withAnnotation(paasv1.IPGroupAnnotation, "ten-shared")))
		eventuallyIPs(first, "192.0.2.16")

		By("and may not request an address in it")
		asks := createService(testenv.LoadBalancerService(other, "asks", withAnnotation(paasv1.IPsAnnotation, "192.0.2.5")))
		c := eventuallyCondition(asks, metav1.ConditionFalse, paasv1.ReasonGroupNotAllowed)
		Expect(c.Message).To(ContainSubstring("requested 192.0.2.5 is in IPGroup ten-team, whose namespaceSelector or serviceSelector does not match this Service"))

		By("the team's Service gets it from the shared group")
		mine := createService(testenv.LoadBalancerService(teamA, "mine", withAnnotation(paasv1.IPGroupAnnotation, "ten-shared")))
		eventuallyIPs(mine, "192.0.2.0")
		eventuallyIPs(createService(testenv.LoadBalancerService(teamA, "asks", withAnnotation(paasv1.IPsAnnotation, "192.0.2.5"))), "192.0.2.5")
	})
})

var _ = Describe("--service-cidrs", Ordered, func() {
	It("reserves configured Service CIDRs besides the ServiceCIDR objects", func() {
		stopOperator()
		saved := operatorOptions
		DeferCleanup(func() { stopOperator(); operatorOptions = saved; runOperator() })
		operatorOptions.ServiceCIDRs = []netip.Prefix{netip.MustParsePrefix("203.0.113.128/25")}
		runOperator()
		g := newIPGroup("rsv-flag", "203.0.113.0/24")
		g.Spec.AutoAssign = new(false)
		createIPGroup(g)
		ns := newNamespace(nil)
		svc := createService(testenv.LoadBalancerService(ns, "asks", withAnnotation(paasv1.IPsAnnotation, "203.0.113.130")))
		c := eventuallyCondition(svc, metav1.ConditionFalse, paasv1.ReasonRequestedIPReserved)
		Expect(c.Message).To(HavePrefix("requested 203.0.113.130 is in the Service CIDR 203.0.113.128/25 (operator flag --service-cidrs), reserved in the cluster"))
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "below", withAnnotation(paasv1.IPsAnnotation, "203.0.113.127"))), "203.0.113.127")
	})
})
