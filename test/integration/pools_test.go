//go:build envtest

package integration

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// Pools with several parts (spec.addresses), dual-stack groups, avoidBuggyIPs.

func addressGroup(name string, addresses ...string) *paasv1.IPGroup {
	return &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: paasv1.IPGroupSpec{Addresses: addresses, AutoAssign: new(false)}}
}

func eventuallyGroupStatus(name string, check func(g Gomega, s paasv1.IPGroupStatus)) {
	EventuallyWithOffset(1, func(g Gomega) {
		var group paasv1.IPGroup
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Name: name}, &group)).To(Succeed())
		g.Expect(group.Status.ObservedGeneration).To(Equal(group.Generation))
		check(g, group.Status)
	}).Should(Succeed())
}

var _ = Describe("IPGroup addresses", func() {
	DescribeTable("the API server refuses a bad part with a message naming it",
		func(spec paasv1.IPGroupSpec, message string) {
			g := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "bad-parts"}, Spec: spec}
			err := k8s.Create(context.Background(), g)
			if err == nil {
				_ = k8s.Delete(context.Background(), g)
			}
			Expect(err).To(HaveOccurred(), "%+v was accepted", spec)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("neither segment nor addresses", paasv1.IPGroupSpec{}, "an IPGroup needs a segment or addresses"),
		Entry("a bare IP", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.1"}}, "each addresses entry is a CIDR"),
		Entry("garbage", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.1-x"}}, "each addresses entry is a CIDR"),
		Entry("host bits", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.1/24"}}, "addresses entry 192.0.2.1/24 must be written as its network address"),
		Entry("too wide (IPv4)", paasv1.IPGroupSpec{Addresses: []string{"10.0.0.0/7"}}, "addresses entry 10.0.0.0/7 is too wide to be a VIP pool"),
		Entry("too wide (IPv6)", paasv1.IPGroupSpec{Addresses: []string{"2001::/15"}}, "addresses entry 2001::/15 is too wide to be a VIP pool"),
		Entry("the unspecified block", paasv1.IPGroupSpec{Addresses: []string{"0.0.0.0/8"}}, "addresses entry 0.0.0.0/8 holds the unspecified address"),
		Entry("the IPv6 unspecified address", paasv1.IPGroupSpec{Addresses: []string{"::/128"}}, "holds the unspecified address"),
		Entry("loopback", paasv1.IPGroupSpec{Addresses: []string{"127.0.0.0/8"}}, "addresses entry 127.0.0.0/8 holds loopback addresses"),
		Entry("IPv6 loopback", paasv1.IPGroupSpec{Addresses: []string{"::1/128"}}, "holds loopback addresses"),
		Entry("multicast", paasv1.IPGroupSpec{Addresses: []string{"224.0.0.0/24"}}, "holds multicast addresses"),
		Entry("IPv6 multicast", paasv1.IPGroupSpec{Addresses: []string{"ff02::/16"}}, "holds multicast addresses"),
		Entry("link-local", paasv1.IPGroupSpec{Addresses: []string{"169.254.0.0/16"}}, "holds link-local addresses"),
		Entry("a /8 around link-local", paasv1.IPGroupSpec{Addresses: []string{"169.0.0.0/8"}}, "holds link-local addresses"),
		Entry("IPv6 link-local", paasv1.IPGroupSpec{Addresses: []string{"fe80::/64"}}, "holds link-local addresses"),
		Entry("limited broadcast", paasv1.IPGroupSpec{Addresses: []string{"255.255.255.255/32"}}, "holds the limited broadcast address"),
		Entry("IPv4-mapped IPv6", paasv1.IPGroupSpec{Addresses: []string{"::ffff:192.0.2.0/120"}}, "IPv4-mapped"),

		Entry("a range of two families", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.1-2001:db8::1"}}, "mixes IPv4 and IPv6"),
		Entry("a range ending before it starts", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.30-192.0.2.20"}}, "addresses entry 192.0.2.30-192.0.2.20 ends before it starts"),
		Entry("an IPv6 range ending before it starts", paasv1.IPGroupSpec{Addresses: []string{"2001:db8::1f-2001:db8::a"}}, "ends before it starts"),
		Entry("an IPv4 range across a /8", paasv1.IPGroupSpec{Addresses: []string{"10.255.255.0-11.0.0.10"}}, "is too wide for a range"),
		Entry("an IPv6 range beyond a /112", paasv1.IPGroupSpec{Addresses: []string{"2001:db8::1-2001:db8::1:1"}}, "is too wide for a range"),
		Entry("a range of the unspecified block", paasv1.IPGroupSpec{Addresses: []string{"0.0.0.1-0.0.0.9"}}, "holds the unspecified address"),
		Entry("a range from ::", paasv1.IPGroupSpec{Addresses: []string{"::-::5"}}, "holds the unspecified address"),
		Entry("a range of loopback", paasv1.IPGroupSpec{Addresses: []string{"127.0.0.1-127.0.0.5"}}, "holds loopback addresses"),
		Entry("a range from ::1", paasv1.IPGroupSpec{Addresses: []string{"::1-::5"}}, "holds loopback addresses"),
		Entry("a range of multicast", paasv1.IPGroupSpec{Addresses: []string{"239.0.0.1-239.0.0.5"}}, "holds multicast addresses"),
		Entry("a range around link-local", paasv1.IPGroupSpec{Addresses: []string{"169.253.255.250-169.254.0.3"}}, "holds link-local addresses"),
		Entry("a range of IPv6 link-local", paasv1.IPGroupSpec{Addresses: []string{"fe80::1-fe80::9"}}, "holds link-local addresses"),
		Entry("a range up to broadcast", paasv1.IPGroupSpec{Addresses: []string{"255.255.255.250-255.255.255.255"}}, "holds the limited broadcast address"),
		Entry("a mapped range", paasv1.IPGroupSpec{Addresses: []string{"::ffff:192.0.2.1-::ffff:192.0.2.9"}}, "IPv4-mapped"),

		Entry("two overlapping CIDRs", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.0/24", "192.0.2.16/28"}}, "addresses entries must not overlap each other"),
		Entry("a CIDR holding a range's start", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.0/28", "192.0.2.10-192.0.2.40"}}, "must not overlap each other"),
		Entry("a range around a CIDR", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.16/28", "192.0.2.1-192.0.2.100"}}, "must not overlap each other"),
		Entry("two overlapping ranges", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.1-192.0.2.10", "192.0.2.10-192.0.2.20"}}, "must not overlap each other"),
		Entry("two overlapping IPv6 ranges", paasv1.IPGroupSpec{Addresses: []string{"2001:db8::1-2001:db8::a", "2001:db8::A-2001:db8::ff"}}, "must not overlap each other"),
		Entry("an IPv6 CIDR inside a range", paasv1.IPGroupSpec{Addresses: []string{"2001:db8::1-2001:db8::ff", "2001:db8::10/124"}}, "must not overlap each other"),
		Entry("the same entry twice", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.0/28", "192.0.2.0/28"}}, "must not overlap each other"),
		Entry("an entry inside the segment", paasv1.IPGroupSpec{Segment: "192.0.2.0/24", Addresses: []string{"192.0.2.10-192.0.2.20"}}, "addresses entries must not overlap the segment"),
		Entry("an excluded IP outside every part", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.0/28"}, ExcludedIPs: []string{"198.51.100.1"}}, "every excludedIPs entry must be inside the segment or one of the addresses"),
		Entry("an excluded IP far from a range", paasv1.IPGroupSpec{Addresses: []string{"192.0.2.10-192.0.2.20"}, ExcludedIPs: []string{"198.51.100.1"}}, "every excludedIPs entry must be inside"),
		Entry("more than 16 entries", paasv1.IPGroupSpec{Addresses: seventeenParts()}, "must have at most 16 items"),
	)

	It("accepts MetalLB's spellings, both families in one group, and parts next to a segment", func() {
		for _, g := range []*paasv1.IPGroup{
			addressGroup("ok-parts", "192.0.2.20-192.0.2.30", "198.51.100.0/28", "203.0.113.5-203.0.113.5"),
			addressGroup("ok-spaced", "192.0.2.40 - 192.0.2.50"),
			addressGroup("ok-dual", "192.0.2.64/28", "2001:db8:45::/120", "2001:db8:45::1:10-2001:db8:45::1:1f"),
			addressGroup("ok-uppercase", "2001:DB8:46::A-2001:db8:46::FF"),
			addressGroup("ok-touching", "192.0.2.80/28", "192.0.2.96-192.0.2.100"),
			{ObjectMeta: metav1.ObjectMeta{Name: "ok-with-segment"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.128/26",
				Addresses: []string{"192.0.2.200-192.0.2.210", "2001:db8:47::/64"}, ExcludedIPs: []string{"192.0.2.130", "192.0.2.205", "2001:db8:47::5"}}},
		} {
			createIPGroup(g)
		}
	})

	It("hands out every part and both families, counts them together, and relocates when a part goes", func() {
		g := addressGroup("parts", "10.245.0.20-10.245.0.21", "10.245.1.0/31", "2001:db8:45:1::/126")
		g.Spec.ExcludedIPs = []string{"10.245.1.1"}
		createIPGroup(g)
		eventuallyGroupStatus("parts", func(g Gomega, s paasv1.IPGroupStatus) {
			// 2 + 2 - 1 excluded + 3 (:: is the subnet-router anycast address)
			g.Expect(s.Capacity).To(Equal("6"))
			g.Expect(meta.IsStatusConditionTrue(s.Conditions, paasv1.IPGroupReady)).To(BeTrue())
		})
		ns := newNamespace(nil)
		named := withAnnotation(paasv1.IPGroupAnnotation, "parts")

		By("a dual-stack Service gets one address of each family from the one group")
		ds := createService(testenv.LoadBalancerService(ns, "ds", named, withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)))
		eventuallyIPs(ds, "10.245.0.20", "2001:db8:45:1::1")
		By("single-stack Services fill the first part, then the next over the gap")
		a := createService(testenv.LoadBalancerService(ns, "a", named))
		eventuallyIPs(a, "10.245.0.21")
		b := createService(testenv.LoadBalancerService(ns, "b", named))
		eventuallyIPs(b, "10.245.1.0")
		c := createService(testenv.LoadBalancerService(ns, "c", named))
		cond := eventuallyCondition(c, metav1.ConditionFalse, paasv1.ReasonIPGroupFull)
		Expect(cond.Message).To(ContainSubstring("parts (3 of 3 in use)"))
		eventuallyGroupStatus("parts", func(g Gomega, s paasv1.IPGroupStatus) {
			g.Expect(s.Allocated).To(BeEquivalentTo(4))
			g.Expect(s.Available).To(Equal("2"))
		})

		By("a requested address in the gap between parts is outside every group")
		gap := createService(testenv.LoadBalancerService(ns, "gap", withLoadBalancerIP("10.245.0.50")))
		eventuallyCondition(gap, metav1.ConditionFalse, paasv1.ReasonRequestedIPOutsideGroups)

		By("replacing the second part, with its addresses released, moves its Service to the new part, as a segment edit does")
		editIPGroup("parts", func(g *paasv1.IPGroup) {
			g.Spec.Addresses = []string{"10.245.0.20-10.245.0.21", "10.245.2.7-10.245.2.8", "2001:db8:45:1::/126"}
			g.Annotations = map[string]string{paasv1.ReleaseAddressesAnnotation: "true"}
		})
		// b moves and the pending c is served; which is first is a race.
		Eventually(func(g Gomega) {
			g.Expect(append(ingressIPs(getService(b)), ingressIPs(getService(c))...)).To(ConsistOf("10.245.2.7", "10.245.2.8"))
		}).Should(Succeed())
		eventuallyIPs(ds, "10.245.0.20", "2001:db8:45:1::1")
		eventuallyRelocating("parts", 0)
		eventuallyGroupStatus("parts", func(g Gomega, s paasv1.IPGroupStatus) {
			g.Expect(s.Capacity).To(Equal("7"))
			g.Expect(s.Allocated).To(BeEquivalentTo(5))
		})
		Eventually(ledger).ShouldNot(HaveKey("10.245.1.0"))
	})

	It("skips .0 and .255 of every /24 with avoidBuggyIPs, and moves a Service off one when it is turned on", func() {
		g := addressGroup("buggy", "10.245.8.254-10.245.9.1")
		createIPGroup(g)
		ns := newNamespace(nil)
		named := withAnnotation(paasv1.IPGroupAnnotation, "buggy")
		first := createService(testenv.LoadBalancerService(ns, "first", named))
		eventuallyIPs(first, "10.245.8.254")
		second := createService(testenv.LoadBalancerService(ns, "second", named))
		eventuallyIPs(second, "10.245.8.255")
		eventuallyGroupStatus("buggy", func(g Gomega, s paasv1.IPGroupStatus) { g.Expect(s.Capacity).To(Equal("4")) })

		editIPGroup("buggy", func(g *paasv1.IPGroup) {
			g.Spec.AvoidBuggyIPs = true
			g.Annotations = map[string]string{paasv1.ReleaseAddressesAnnotation: "true"}
		})
		eventuallyIPs(second, "10.245.9.1")
		eventuallyIPs(first, "10.245.8.254")
		eventuallyGroupStatus("buggy", func(g Gomega, s paasv1.IPGroupStatus) {
			g.Expect(s.Capacity).To(Equal("2"))
			g.Expect(s.Relocating).To(BeEquivalentTo(0))
		})
		third := createService(testenv.LoadBalancerService(ns, "third", named, withLoadBalancerIP("10.245.9.0")))
		cond := eventuallyCondition(third, metav1.ConditionFalse, paasv1.ReasonRequestedIPExcluded)
		Expect(cond.Message).To(ContainSubstring("requested 10.245.9.0 ends in .0 or .255, which IPGroup buggy never hands out (spec.avoidBuggyIPs)"))
	})

	It("reports groups overlapping through any part", func() {
		createIPGroup(addressGroup("ovl-a", "10.245.16.0/28", "10.245.17.10-10.245.17.20"))
		createIPGroup(addressGroup("ovl-b", "10.245.17.15/32"))
		createIPGroup(addressGroup("ovl-c", "10.245.18.0/28"))
		eventuallyGroupStatus("ovl-a", func(g Gomega, s paasv1.IPGroupStatus) {
			c := meta.FindStatusCondition(s.Conditions, paasv1.IPGroupOverlapping)
			g.Expect(c).NotTo(BeNil())
			g.Expect(c.Status).To(Equal(metav1.ConditionTrue))
			g.Expect(c.Message).To(ContainSubstring("overlaps IPGroup ovl-b (addresses 10.245.17.15/32)"))
			g.Expect(c.Message).NotTo(ContainSubstring("ovl-c"))
		})
		eventuallyGroupStatus("ovl-c", func(g Gomega, s paasv1.IPGroupStatus) {
			g.Expect(meta.IsStatusConditionFalse(s.Conditions, paasv1.IPGroupOverlapping)).To(BeTrue())
		})
	})
})

func seventeenParts() []string {
	var out []string
	for i := range 17 {
		out = append(out, fmt.Sprintf("192.0.2.%d/32", i+1))
	}
	return out
}
