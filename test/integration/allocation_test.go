//go:build envtest

package integration

import (
	"context"
	"os/exec"
	"path/filepath"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

var _ = Describe("allocation from the original IPGroup", func() {
	It("gives every LoadBalancer Service a free, non-excluded IP with ipMode Proxy, a condition and an Event", func() {
		ctx := context.Background()
		createIPGroup(newIPGroup("192.0.2.0-24", "192.0.2.0/24", "192.0.2.0", "192.0.2.255"))
		ns := newNamespace(nil)

		first := createService(testenv.LoadBalancerService(ns, "first"))
		got := eventuallyIPs(first, "192.0.2.1")
		Expect(got.Status.LoadBalancer.Ingress[0].IPMode).To(HaveValue(Equal(corev1.LoadBalancerIPModeProxy)))
		c := eventuallyCondition(first, metav1.ConditionTrue, paasv1.ReasonAllocated)
		Expect(c.Message).To(Equal("holds 192.0.2.1 from IPGroup 192.0.2.0-24"))
		eventuallyEvent(first, corev1.EventTypeNormal, service.EventIPAllocated, "Allocated 192.0.2.1 from IPGroup 192.0.2.0-24")

		ours := createService(testenv.LoadBalancerService(ns, "ours", withClass(paasv1.LoadBalancerClass)))
		eventuallyIPs(ours, "192.0.2.2")

		By("leaving Services of another class and other types alone")
		other := createService(testenv.LoadBalancerService(ns, "other", withClass("example.com/other-lb")))
		clusterIP := createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "cip"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
		third := createService(testenv.LoadBalancerService(ns, "third"))
		eventuallyIPs(third, "192.0.2.3")
		Consistently(func() []string { return ingressIPs(getService(other)) }, "1s").Should(BeEmpty())
		Expect(getService(clusterIP).Status.Conditions).To(BeEmpty())

		By("recording each allocation in the ledger")
		ip := ledger()["192.0.2.1"]
		Expect(ip.Labels).To(HaveKeyWithValue(paasv1.IPGroupLabel, "192.0.2.0-24"))
		Expect(ip.Annotations).To(HaveKeyWithValue(paasv1.OwnerAnnotation, ns+"/first"))
		Expect(ip.Spec.Owner).To(Equal(&paasv1.IPOwner{Namespace: ns, Name: "first", UID: got.UID}))
		Expect(ip.Spec.Address).To(Equal("192.0.2.1"))

		By("counting them on the IPGroup, shown by kubectl get ipg")
		Eventually(func(g Gomega) {
			var group paasv1.IPGroup
			g.Expect(k8s.Get(ctx, types.NamespacedName{Name: "192.0.2.0-24"}, &group)).To(Succeed())
			g.Expect(group.Status.Capacity).To(Equal("254"))
			g.Expect(group.Status.Allocated).To(BeEquivalentTo(3))
			g.Expect(group.Status.Available).To(Equal("251"))
		}).Should(Succeed())
		kubeconfig, err := env.KubeconfigFile(tempDir)
		Expect(err).NotTo(HaveOccurred())
		out, err := exec.Command(filepath.Join(env.Root, "bin", "k8s", "kubectl"), "--kubeconfig", kubeconfig, "get", "ipg").CombinedOutput()
		Expect(err).NotTo(HaveOccurred(), string(out))
		Expect(string(out)).To(MatchRegexp(`NAME\s+SEGMENT\s+MODE\s+ALLOCATED\s+CAPACITY\s+READY`))
		Expect(string(out)).To(MatchRegexp(`192.0.2.0-24\s+192.0.2.0/24\s+L2\s+3\s+254\s+True`))
	})
})

var _ = Describe("requests", func() {
	It("honours spec.loadBalancerIP, vip.paas.org/ips and vip.paas.org/ipgroup", func() {
		createIPGroup(newIPGroup("req-a", "198.51.100.0/25"))
		manual := newIPGroup("req-manual", "198.51.100.128/25")
		manual.Spec.AutoAssign = new(false)
		createIPGroup(manual)
		ns := newNamespace(nil)

		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "by-spec", withLoadBalancerIP("198.51.100.77"))), "198.51.100.77")
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "by-annotation", withAnnotation(paasv1.IPsAnnotation, "198.51.100.200"))), "198.51.100.200")
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "by-group", withAnnotation(paasv1.IPGroupAnnotation, "req-manual"))), "198.51.100.128")
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "auto")), "198.51.100.0")
	})

	It("gives dual-stack Services one IP per family and serves IPv6 /64 segments", func() {
		createIPGroup(newIPGroup("ds-v4", "203.0.113.0/24"))
		createIPGroup(newIPGroup("ds-v6", "2001:db8:1::/64", "2001:db8:1::"))
		ns := newNamespace(nil)

		dual := createService(testenv.LoadBalancerService(ns, "dual", withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv6Protocol, corev1.IPv4Protocol)))
		eventuallyIPs(dual, "2001:db8:1::1", "203.0.113.0")
		Expect(ledger()).To(HaveKey("2001-db8-1--1"), "IPv6 ledger names write ':' as '-'")

		deep := createService(testenv.LoadBalancerService(ns, "deep", withFamilies(corev1.IPFamilyPolicySingleStack, corev1.IPv6Protocol),
			withAnnotation(paasv1.IPsAnnotation, "2001:db8:1:0:ffff:ffff:ffff:fffe")))
		eventuallyIPs(deep, "2001:db8:1:0:ffff:ffff:ffff:fffe")

		Eventually(func(g Gomega) {
			var group paasv1.IPGroup
			g.Expect(k8s.Get(context.Background(), types.NamespacedName{Name: "ds-v6"}, &group)).To(Succeed())
			g.Expect(group.Status.Capacity).To(Equal("18446744073709551615"))
			g.Expect(group.Status.Allocated).To(BeEquivalentTo(2))
		}).Should(Succeed())

		By("asking for both families in one annotation")
		both := createService(testenv.LoadBalancerService(ns, "both", withFamilies(corev1.IPFamilyPolicyPreferDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol),
			withAnnotation(paasv1.IPsAnnotation, "2001:db8:1::50, 203.0.113.50")))
		eventuallyIPs(both, "203.0.113.50", "2001:db8:1::50")
	})
})

var _ = Describe("refusals", func() {
	It("explains each failure on the Service and retries when something changes", func() {
		ctx := context.Background()
		ns := newNamespace(nil)

		By("no IPGroup at all")
		waiting := createService(testenv.LoadBalancerService(ns, "waiting"))
		c := eventuallyCondition(waiting, metav1.ConditionFalse, paasv1.ReasonNoIPGroup)
		Expect(c.Message).To(ContainSubstring("no auto-assign IPv4 IPGroup admits this Service"))
		eventuallyEvent(waiting, corev1.EventTypeWarning, service.EventAllocationFailed, "no auto-assign IPv4 IPGroup")
		Eventually(func() float64 { return gauge("vip_allocator_services_pending", "reason", paasv1.ReasonNoIPGroup) }).Should(BeNumerically(">=", 1),
			"a pending Service is counted (alerts read it)")
		Expect(gauge("vip_allocator_services_pending_seconds", "reason", paasv1.ReasonNoIPGroup)).To(BeNumerically(">=", 0))

		By("served as soon as a group appears")
		createIPGroup(newIPGroup("tiny", "192.0.2.0/31"))
		eventuallyIPs(waiting, "192.0.2.0")
		eventuallyCondition(waiting, metav1.ConditionTrue, paasv1.ReasonAllocated)

		By("the group full")
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "second")), "192.0.2.1")
		third := createService(testenv.LoadBalancerService(ns, "third"))
		c = eventuallyCondition(third, metav1.ConditionFalse, paasv1.ReasonIPGroupFull)
		Expect(c.Message).To(Equal("no free IPv4 address in IPGroup tiny (2 of 2 in use); add addresses to a group, create another group, or free an address"))

		By("served when an address is freed")
		Expect(k8s.Delete(ctx, waiting)).To(Succeed())
		eventuallyIPs(third, "192.0.2.0")

		By("a requested IP held by another Service")
		taken := createService(testenv.LoadBalancerService(ns, "taken", withLoadBalancerIP("192.0.2.1")))
		c = eventuallyCondition(taken, metav1.ConditionFalse, paasv1.ReasonRequestedIPInUse)
		Expect(c.Message).To(ContainSubstring("requested 192.0.2.1 is already held by " + ns + "/second"))
		eventuallyEvent(taken, corev1.EventTypeWarning, service.EventAllocationFailed, "already held by")
		Expect(k8s.Delete(ctx, getService(createService(testenv.LoadBalancerService(ns, "unrelated", withClass("example.com/x")))))).To(Succeed())
		Expect(k8s.Delete(ctx, getService(testenv.LoadBalancerService(ns, "second")))).To(Succeed())
		eventuallyIPs(taken, "192.0.2.1")

		By("a requested IP that is excluded")
		createIPGroup(newIPGroup("excl", "198.51.100.0/24", "198.51.100.0", "198.51.100.255", "198.51.100.128/28"))
		excluded := createService(testenv.LoadBalancerService(ns, "excluded", withLoadBalancerIP("198.51.100.130")))
		c = eventuallyCondition(excluded, metav1.ConditionFalse, paasv1.ReasonRequestedIPExcluded)
		Expect(c.Message).To(ContainSubstring("requested 198.51.100.130 is excluded from IPGroup excl"))

		By("a requested IP outside every group")
		outside := createService(testenv.LoadBalancerService(ns, "outside", withAnnotation(paasv1.IPsAnnotation, "203.0.113.99")))
		c = eventuallyCondition(outside, metav1.ConditionFalse, paasv1.ReasonRequestedIPOutsideGroups)
		Expect(c.Message).To(ContainSubstring("requested 203.0.113.99 is in no IPGroup"))
		By("served once a group covers it")
		createIPGroup(newIPGroup("covers", "203.0.113.96/28"))
		eventuallyIPs(outside, "203.0.113.99")

		By("a group the Service may not use")
		restricted := newIPGroup("restricted", "203.0.113.0/28")
		restricted.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}
		createIPGroup(restricted)
		denied := createService(testenv.LoadBalancerService(ns, "denied", withAnnotation(paasv1.IPGroupAnnotation, "restricted")))
		c = eventuallyCondition(denied, metav1.ConditionFalse, paasv1.ReasonGroupNotAllowed)
		Expect(c.Message).To(ContainSubstring("IPGroup restricted does not admit this Service"))
		By("served when the namespace gets the label")
		var nsObj corev1.Namespace
		Expect(k8s.Get(ctx, types.NamespacedName{Name: ns}, &nsObj)).To(Succeed())
		nsObj.Labels["team"] = "blue"
		Expect(k8s.Update(ctx, &nsObj)).To(Succeed())
		eventuallyIPs(denied, "203.0.113.0")

		By("a malformed request")
		bad := createService(testenv.LoadBalancerService(ns, "bad", withAnnotation(paasv1.IPsAnnotation, "not-an-ip")))
		c = eventuallyCondition(bad, metav1.ConditionFalse, paasv1.ReasonInvalidRequest)
		Expect(c.Message).To(ContainSubstring(`"not-an-ip" is not an IP address`))
		Expect(getService(bad).Status.LoadBalancer.Ingress).To(BeEmpty())

		By("a RequireDualStack Service that gets only one family")
		half := createService(testenv.LoadBalancerService(ns, "half", withFamilies(corev1.IPFamilyPolicyRequireDualStack, corev1.IPv4Protocol, corev1.IPv6Protocol)))
		c = eventuallyCondition(half, metav1.ConditionFalse, paasv1.ReasonNoIPGroup)
		Expect(c.Message).To(ContainSubstring("no auto-assign IPv6 IPGroup"))
		Expect(addr(eventuallyHasIPs(half, 1)[0]).Is4()).To(BeTrue(), "it keeps the IPv4 address it got meanwhile")
	})
})

var _ = Describe("IPGroup validation in the API server", func() {
	DescribeTable("rejects bad IPGroups with a message",
		func(segment string, excluded []string, message string) {
			err := k8s.Create(context.Background(), newIPGroup("bad", segment, excluded...))
			Expect(err).To(HaveOccurred())
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("segment not a CIDR", "192.0.2.0", nil, "segment must be a CIDR"),
		Entry("segment garbage", "hello", nil, "segment must be a CIDR"),
		Entry("segment with host bits", "192.0.2.7/24", nil, "segment must be written as its network address"),
		Entry("excluded IP outside", "192.0.2.0/24", []string{"198.51.100.1"}, "must be inside the segment"),
		Entry("excluded IP of the other family", "192.0.2.0/24", []string{"2001:db8::1"}, "must be inside the segment"),
		Entry("excluded CIDR outside", "192.0.2.0/24", []string{"198.51.100.0/28"}, "must be inside the segment"),
		Entry("excluded garbage", "192.0.2.0/24", []string{"192.0.2.x"}, "excludedIPs entries must be IPs or CIDRs"),
	)

	It("accepts excluded CIDRs inside the segment", func() {
		createIPGroup(newIPGroup("ranges", "2001:db8:2::/64", "2001:db8:2::/120", "2001:db8:2::ffff"))
	})

	It("reports overlapping segments on both groups", func() {
		createIPGroup(newIPGroup("wide", "198.51.100.0/24"))
		createIPGroup(newIPGroup("narrow", "198.51.100.64/26"))
		createIPGroup(newIPGroup("apart", "203.0.113.0/24"))
		for name, want := range map[string]metav1.ConditionStatus{"wide": "True", "narrow": "True", "apart": "False"} {
			Eventually(func(g Gomega) {
				var group paasv1.IPGroup
				g.Expect(k8s.Get(context.Background(), types.NamespacedName{Name: name}, &group)).To(Succeed())
				c := findCondition(group.Status.Conditions, paasv1.IPGroupOverlapping)
				g.Expect(c).NotTo(BeNil())
				g.Expect(c.Status).To(Equal(want), name)
			}).Should(Succeed())
		}
	})
})

var _ = Describe("release", func() {
	It("holds a Service by the cleanup finalizer until it frees the IP, when deleted or no longer a LoadBalancer", func() {
		ctx := context.Background()
		createIPGroup(newIPGroup("rel", "192.0.2.64/28"))
		ns := newNamespace(nil)
		svc := eventuallyIPs(createService(testenv.LoadBalancerService(ns, "gone")), "192.0.2.64")
		Expect(getService(svc).Finalizers).To(ConsistOf(service.CleanupFinalizer))
		Expect(ledger()).To(HaveKey("192.0.2.64"))
		Expect(k8s.Delete(ctx, svc)).To(Succeed())
		Eventually(ledger).ShouldNot(HaveKey("192.0.2.64"))
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(svc), &corev1.Service{}))
		}).Should(BeTrue(), "the operator drops its finalizer once the address is free")

		changing := eventuallyIPs(createService(testenv.LoadBalancerService(ns, "changing")), "192.0.2.64")
		// The operator keeps writing the status (the Announced condition) after the
		// address shows: the change is made on the latest version.
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			changing = getService(changing)
			changing.Spec.Type = corev1.ServiceTypeClusterIP
			changing.Spec.Ports[0].NodePort = 0
			return k8s.Update(ctx, changing)
		})).To(Succeed())
		Eventually(ledger).ShouldNot(HaveKey("192.0.2.64"))
		Eventually(func(g Gomega) {
			got := getService(changing)
			g.Expect(got.Status.LoadBalancer.Ingress).To(BeEmpty())
			g.Expect(findCondition(got.Status.Conditions, paasv1.ConditionIPAllocated)).To(BeNil())
			g.Expect(got.Finalizers).NotTo(ContainElement(service.CleanupFinalizer))
		}).Should(Succeed())
		eventuallyEvent(changing, corev1.EventTypeNormal, service.EventIPReleased, "192.0.2.64")
	})

	It("leaves the cleanup finalizer of another implementation's Service", func() {
		ctx := context.Background()
		ns := newNamespace(nil)
		other := testenv.LoadBalancerService(ns, "elsewhere")
		other.Spec.LoadBalancerClass = ptr.To("example.com/cloud")
		other.Finalizers = []string{service.CleanupFinalizer}
		other = createService(other)
		Expect(k8s.Delete(ctx, other)).To(Succeed())
		Consistently(func() []string { return getService(other).Finalizers }, "2s").Should(ConsistOf(service.CleanupFinalizer))
		Expect(retry.RetryOnConflict(retry.DefaultRetry, func() error {
			got := getService(other)
			got.Finalizers = nil
			return k8s.Update(ctx, got)
		})).To(Succeed())
	})

	It("garbage-collects ledger objects whose owner no longer exists", func() {
		ctx := context.Background()
		orphan := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.200",
			Annotations: map[string]string{paasv1.OwnerAnnotation: "nowhere/ghost"}},
			Spec: paasv1.IPSpec{Address: "192.0.2.200", Owner: &paasv1.IPOwner{Namespace: "nowhere", Name: "ghost", UID: "0000-dead"}}}
		Expect(env.Operator.Create(ctx, orphan)).To(Succeed())
		Eventually(ledger).ShouldNot(HaveKey("192.0.2.200"))

		By("also when the Service exists again under the same name but is another object")
		ns := newNamespace(nil)
		createIPGroup(newIPGroup("gc", "192.0.2.208/28"))
		reborn := eventuallyIPs(createService(testenv.LoadBalancerService(ns, "reborn")), "192.0.2.208")
		stale := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.222"},
			Spec: paasv1.IPSpec{Address: "192.0.2.222", Owner: &paasv1.IPOwner{Namespace: ns, Name: "reborn", UID: "0000-old"}}}
		Expect(env.Operator.Create(ctx, stale)).To(Succeed())
		Eventually(ledger).ShouldNot(HaveKey("192.0.2.222"))
		Expect(ingressIPs(getService(reborn))).To(Equal([]string{"192.0.2.208"}))
	})
})

var _ = Describe("the ledger", func() {
	It("may be written only by the operator's ServiceAccount", func() {
		ctx := context.Background()
		ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "203.0.113.1"}}
		err := k8s.Create(ctx, ip)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("only the operator writes them"))

		createIPGroup(newIPGroup("ledger", "203.0.113.0/29"))
		svc := eventuallyIPs(createService(testenv.LoadBalancerService(newNamespace(nil), "held")), "203.0.113.0")
		held := ledger()["203.0.113.0"]
		err = k8s.Delete(ctx, &held)
		Expect(err).To(HaveOccurred())
		Expect(err.Error()).To(ContainSubstring("only the operator writes them"))
		Expect(ingressIPs(getService(svc))).To(Equal([]string{"203.0.113.0"}))
	})

	It("counts legacy VirtualIP ledger entries as taken", func() {
		ctx := context.Background()
		legacy := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "198.51.100.5",
			Labels:      map[string]string{paasv1.LegacyGSMLabel: "old-gsm"},
			Annotations: map[string]string{paasv1.OwnerAnnotation: "legacy/app-vip"}}}
		Expect(env.Operator.Create(ctx, legacy)).To(Succeed())
		DeferCleanup(func() { Expect(env.Operator.Delete(ctx, legacy)).To(Succeed()) })
		createIPGroup(newIPGroup("legacy-seg", "198.51.100.0/24"))
		ns := newNamespace(nil)
		want := createService(testenv.LoadBalancerService(ns, "wants-legacy", withLoadBalancerIP("198.51.100.5")))
		c := eventuallyCondition(want, metav1.ConditionFalse, paasv1.ReasonRequestedIPInUse)
		Expect(c.Message).To(ContainSubstring("held by a VirtualIP in another namespace"))
		Expect(c.Message).NotTo(ContainSubstring("app-vip"))
		Consistently(ledger, "1s").Should(HaveKeyWithValue("198.51.100.5", HaveField("Spec.Owner", BeNil())))
	})
})

func findCondition(cs []metav1.Condition, t string) *metav1.Condition {
	for i := range cs {
		if cs[i].Type == t {
			return &cs[i]
		}
	}
	return nil
}

var _ client.Object = &paasv1.IP{}

var _ = Describe("legacy VirtualIPs", Ordered, func() {
	It("count as taken after a restart, so their addresses are never handed out twice", func() {
		ctx := context.Background()
		ns := newNamespace(nil)
		vip := &paasv1.VirtualIP{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "old-vip"}, Spec: paasv1.VirtualIPSpec{Service: "app"}}
		allowVirtualIPCreation(func() { Expect(k8s.Create(ctx, vip)).To(Succeed()) }) // the deny-create policy would refuse it
		vip.Status = paasv1.VirtualIPStatus{State: "Valid", IP: "203.0.113.200", Service: "app", ClonedService: "old-vip-keepalived-clone", GSM: "gsm-a", KeepalivedGroup: "ns/kg"}
		Expect(k8s.Status().Update(ctx, vip)).To(Succeed())
		DeferCleanup(func() { Expect(k8s.Delete(ctx, vip)).To(Succeed()) })

		stopOperator()
		runOperator()
		createIPGroup(newIPGroup("legacy-v", "203.0.113.192/28"))
		svc := createService(testenv.LoadBalancerService(ns, "wants-vip", withLoadBalancerIP("203.0.113.200")))
		c := eventuallyCondition(svc, metav1.ConditionFalse, paasv1.ReasonRequestedIPInUse)
		Expect(c.Message).To(ContainSubstring("held by VirtualIP " + ns + "/old-vip"))
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "auto")), "203.0.113.192")
	})
})
