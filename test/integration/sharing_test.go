//go:build envtest

package integration

import (
	"context"
	"fmt"
	"slices"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	ledgerrules "github.com/paas-org/vip-allocator-operator/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

func withPorts(ports ...corev1.ServicePort) svcOption {
	return func(s *corev1.Service) { s.Spec.Ports = ports }
}

func port(proto corev1.Protocol, n int32) corev1.ServicePort {
	return corev1.ServicePort{Name: strings.ToLower(string(proto)) + fmt.Sprint(n), Protocol: proto, Port: n, TargetPort: intstr.FromInt32(n)}
}

func withLocal(selector map[string]string) svcOption {
	return func(s *corev1.Service) {
		s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
		s.Spec.Selector = selector
	}
}

// holdersOf is the "namespace/name" of every holder the ledger object of ip names.
func holdersOf(ip string) []string {
	var out []string
	obj, ok := ledger()[ip]
	if !ok {
		return nil
	}
	for _, o := range ledgerrules.Holders(&obj) {
		out = append(out, o.Namespace+"/"+o.Name)
	}
	return out
}

var _ = Describe("shared addresses", func() {
	It("gives the Services of one sharing key one address, keeps a colliding one pending, and frees it with the last holder", func() {
		createIPGroup(newIPGroup("share", "10.210.0.0/24", "10.210.0.0"))
		ns := newNamespace(nil)
		tcp := createService(testenv.LoadBalancerService(ns, "dns-tcp", withAnnotation(paasv1.SharingKeyAnnotation, "dns"), withPorts(port(corev1.ProtocolTCP, 53))))
		vip := eventuallyHasIPs(tcp, 1)[0]

		By("MetalLB's annotation is the same key")
		udp := createService(testenv.LoadBalancerService(ns, "dns-udp", withAnnotation(paasv1.MetalLBSharingAnnotation, "dns"), withPorts(port(corev1.ProtocolUDP, 53))))
		eventuallyIPs(udp, vip)
		Eventually(func() []string { return holdersOf(vip) }).Should(Equal([]string{ns + "/dns-tcp", ns + "/dns-udp"}))
		Expect(ledger()[vip].Spec.SharingKey).To(Equal("dns"))

		By("a port collision (Cilium's annotation) stays pending, naming the other Service and the port")
		clash := createService(testenv.LoadBalancerService(ns, "dns-tcp2", withAnnotation(paasv1.CiliumSharingKeyAnnotation, "dns"), withPorts(port(corev1.ProtocolTCP, 53))))
		c := eventuallyCondition(clash, metav1.ConditionFalse, paasv1.ReasonSharedPortCollision)
		Expect(c.Message).To(And(ContainSubstring(ns+"/dns-tcp"), ContainSubstring("TCP/53")))
		Expect(ingressIPs(getService(clash))).To(BeEmpty())

		By("asking for the address explicitly, with the key, joins it")
		web := createService(testenv.LoadBalancerService(ns, "web", withAnnotation(paasv1.SharingKeyAnnotation, "dns"), withAnnotation(paasv1.IPsAnnotation, vip)))
		eventuallyIPs(web, vip)
		By("asking for it without the key is refused")
		thief := createService(testenv.LoadBalancerService(ns, "thief", withAnnotation(paasv1.IPsAnnotation, vip), withPorts(port(corev1.ProtocolTCP, 8443))))
		Expect(eventuallyCondition(thief, metav1.ConditionFalse, paasv1.ReasonRequestedIPInUse).Message).To(ContainSubstring(vip))

		By("the same key in another namespace is another address")
		other := newNamespace(nil)
		elsewhere := createService(testenv.LoadBalancerService(other, "dns-tcp", withAnnotation(paasv1.SharingKeyAnnotation, "dns"), withPorts(port(corev1.ProtocolTCP, 53))))
		Expect(eventuallyHasIPs(elsewhere, 1)[0]).NotTo(Equal(vip))

		By("a hostile key is refused with what to write")
		hostile := createService(testenv.LoadBalancerService(ns, "hostile", withAnnotation(paasv1.SharingKeyAnnotation, strings.Repeat("x", 300)+"$(reboot)")))
		Expect(eventuallyCondition(hostile, metav1.ConditionFalse, paasv1.ReasonInvalidRequest).Message).To(And(ContainSubstring("write at most 63 letters"), Not(ContainSubstring("reboot"))))

		By("the first holder drops the port: the pending one joins")
		edited := getService(tcp)
		edited.Spec.Ports = []corev1.ServicePort{port(corev1.ProtocolTCP, 853)}
		Expect(k8s.Update(context.Background(), edited)).To(Succeed())
		eventuallyIPs(clash, vip)
		Eventually(func() []string { return holdersOf(vip) }).Should(Equal([]string{ns + "/dns-tcp", ns + "/dns-udp", ns + "/web", ns + "/dns-tcp2"}))

		By("the first holder leaves: the address stays, the next holder owns the ledger object")
		Expect(k8s.Delete(context.Background(), tcp)).To(Succeed())
		Eventually(func() []string { return holdersOf(vip) }).Should(Equal([]string{ns + "/dns-udp", ns + "/web", ns + "/dns-tcp2"}))
		Expect(ledger()[vip].Annotations[paasv1.OwnerAnnotation]).To(Equal(ns + "/dns-udp"))
		eventuallyIPs(udp, vip)

		By("the last holder leaves: the address is released (the one asking for it without the key goes first)")
		for _, s := range []*corev1.Service{thief, udp, web, clash} {
			Expect(k8s.Delete(context.Background(), s)).To(Succeed())
		}
		Eventually(func() []string { return holdersOf(vip) }).Should(BeEmpty())
		Eventually(func() map[string]paasv1.IP { return ledger() }).ShouldNot(HaveKey(vip))
	})

	It("shares Local Services only when they select the same endpoints", func() {
		createIPGroup(newIPGroup("share-local", "10.211.0.0/24", "10.211.0.0"))
		ns := newNamespace(nil)
		a := createService(testenv.LoadBalancerService(ns, "a", withAnnotation(paasv1.SharingKeyAnnotation, "k"), withLocal(map[string]string{"app": "dns"}), withPorts(port(corev1.ProtocolTCP, 53))))
		vip := eventuallyHasIPs(a, 1)[0]
		b := createService(testenv.LoadBalancerService(ns, "b", withAnnotation(paasv1.SharingKeyAnnotation, "k"), withLocal(map[string]string{"app": "dns"}), withPorts(port(corev1.ProtocolUDP, 53))))
		eventuallyIPs(b, vip)
		c := createService(testenv.LoadBalancerService(ns, "c", withAnnotation(paasv1.SharingKeyAnnotation, "k"), withLocal(map[string]string{"app": "web"}), withPorts(port(corev1.ProtocolTCP, 80))))
		Expect(eventuallyCondition(c, metav1.ConditionFalse, paasv1.ReasonSharedEndpointsDiffer).Message).To(ContainSubstring("app=web"))
		d := createService(testenv.LoadBalancerService(ns, "d", withAnnotation(paasv1.SharingKeyAnnotation, "k"), withPorts(port(corev1.ProtocolTCP, 80))))
		eventuallyIPs(d, vip) // policy Cluster: any node carries it
	})

	It("does not share Local Services of two namespaces, whose one selector picks other Pods", func() {
		createIPGroup(newIPGroup("share-local-cross", "10.215.0.0/24", "10.215.0.0"))
		nsA, nsB := newNamespace(nil), newNamespace(nil)
		local := func(ns string, p corev1.ServicePort) *corev1.Service {
			return testenv.LoadBalancerService(ns, "dns", withAnnotation(paasv1.SharingKeyAnnotation, "k"), withAnnotation(paasv1.SharingCrossNamespaceAnnotation, "*"),
				withLocal(map[string]string{"app": "dns"}), withPorts(p))
		}
		a := createService(local(nsA, port(corev1.ProtocolTCP, 53)))
		eventuallyHasIPs(a, 1)
		b := createService(local(nsB, port(corev1.ProtocolUDP, 53)))
		msg := eventuallyCondition(b, metav1.ConditionFalse, paasv1.ReasonSharedEndpointsDiffer).Message
		Expect(msg).To(And(ContainSubstring("in namespace "+nsA), ContainSubstring("in namespace "+nsB)))
	})

	It("shares across namespaces only when both list each other", func() {
		createIPGroup(newIPGroup("share-cross", "10.212.0.0/24", "10.212.0.0"))
		nsA, nsB, nsC := newNamespace(nil), newNamespace(nil), newNamespace(nil)
		a := createService(testenv.LoadBalancerService(nsA, "dns", withAnnotation(paasv1.SharingKeyAnnotation, "g"), withAnnotation(paasv1.SharingCrossNamespaceAnnotation, nsB), withPorts(port(corev1.ProtocolTCP, 53))))
		vip := eventuallyHasIPs(a, 1)[0]
		b := createService(testenv.LoadBalancerService(nsB, "dns", withAnnotation(paasv1.CiliumSharingKeyAnnotation, "g"), withAnnotation(paasv1.CiliumSharingCrossNamespaceAnnotation, nsA), withPorts(port(corev1.ProtocolUDP, 53))))
		eventuallyIPs(b, vip)
		c := createService(testenv.LoadBalancerService(nsC, "dns", withAnnotation(paasv1.SharingKeyAnnotation, "g"), withAnnotation(paasv1.SharingCrossNamespaceAnnotation, "*"), withPorts(port(corev1.ProtocolTCP, 80))))
		Expect(eventuallyHasIPs(c, 1)[0]).NotTo(Equal(vip), "nsA does not list nsC")
	})

	It("admits two Services of 2,048 ports each on one address and refuses a port more, with the counts", func() {
		createIPGroup(newIPGroup("share-ports", "10.214.0.0/24", "10.214.0.0"))
		ns := newNamespace(nil)
		many := func(name string, first int32) *corev1.Service {
			var ports []corev1.ServicePort
			for p := first; p < first+paasv1.MaxSharedPorts/2; p++ {
				ports = append(ports, port(corev1.ProtocolTCP, p))
			}
			// Without node ports a Service may have more ports than the node-port range.
			return testenv.LoadBalancerService(ns, name, withAnnotation(paasv1.SharingKeyAnnotation, "wide"), withPorts(ports...),
				func(s *corev1.Service) { s.Spec.AllocateLoadBalancerNodePorts = ptr.To(false) })
		}
		a := createService(many("a", 1))
		vip := eventuallyHasIPs(a, 1)[0]
		b := createService(many("b", 1+paasv1.MaxSharedPorts/2))
		eventuallyIPs(b, vip)

		c := createService(testenv.LoadBalancerService(ns, "c", withAnnotation(paasv1.SharingKeyAnnotation, "wide"), withPorts(port(corev1.ProtocolUDP, 53))))
		msg := eventuallyCondition(c, metav1.ConditionFalse, paasv1.ReasonSharedTooManyPorts).Message
		Expect(msg).To(And(ContainSubstring(vip), ContainSubstring("4096 ports"), ContainSubstring("carries at most 4096")))
		Expect(ingressIPs(getService(c))).To(BeEmpty())
	})

	It("rebuilds shared addresses exactly across restarts under churn", func() {
		const triples = 150
		createIPGroup(newIPGroup("share-churn", "10.213.0.0/16"))
		ns := newNamespace(nil)
		member := func(t, m int) *corev1.Service {
			ports := []corev1.ServicePort{port(corev1.ProtocolTCP, 53), port(corev1.ProtocolUDP, 53), port(corev1.ProtocolTCP, 80)}
			return testenv.LoadBalancerService(ns, fmt.Sprintf("t%d-m%d", t, m), withAnnotation(paasv1.SharingKeyAnnotation, fmt.Sprintf("key-%d", t)), withPorts(ports[m]))
		}
		create := func(from, to int) {
			inParallel(3*(to-from), func(i int) {
				Expect(k8s.Create(context.Background(), member(from+i/3, i%3))).To(Succeed())
			})
		}

		By("stopping the operator while it allocates")
		go create(0, triples)
		Eventually(func() int { return len(holdings(ns)) }, "120s").Should(BeNumerically(">=", triples/2))
		stopOperator()
		before := holdings(ns)
		Expect(len(before)).To(BeNumerically("<", 3*triples), "the stop must land mid-churn")

		By("churning while it is down: members deleted, new triples")
		for t := range 20 {
			Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), member(t, t%3)))).To(Succeed())
			delete(before, member(t, t%3).Name)
		}
		create(triples, triples+20)

		By("restarting, and restarting again at once")
		runOperator()
		Eventually(func() int { return len(holdings(ns)) }, "120s").Should(BeNumerically(">", len(before)+30))
		stopOperator()
		runOperator()

		By("every Service served; each key on one address, no address held by two keys; the ledger names exactly the holders; nothing moved")
		Eventually(func(g Gomega) {
			held := holdings(ns)
			g.Expect(held).To(HaveLen(3*(triples+20) - 20))
			expectSharedConsistent(g, ns, held)
		}, "180s", "1s").Should(Succeed())
		after := holdings(ns)
		changed := 0
		for name, ips := range before {
			if !slices.Equal(after[name], ips) {
				changed++
			}
		}
		Expect(changed).To(BeZero(), "addresses changed across the restarts")
		deleteAllServices(ns)
	})
})

// expectSharedConsistent checks that the Services of each sharing key (the
// name's "t<i>-" prefix) hold one address, that no address is held by two
// keys, and that each ledger object names exactly the Services whose status
// shows its address.
func expectSharedConsistent(g Gomega, ns string, held map[string][]string) {
	keyOf := func(svc string) string { return strings.SplitN(svc, "-", 2)[0] }
	addrOfKey, keyOfAddr, shownBy := map[string]string{}, map[string]string{}, map[string][]string{}
	for svc, ips := range held {
		g.Expect(ips).To(HaveLen(1))
		ip, key := ips[0], keyOf(svc)
		if a, ok := addrOfKey[key]; ok {
			g.Expect(ip).To(Equal(a), "key %s on two addresses", key)
		}
		if k, ok := keyOfAddr[ip]; ok {
			g.Expect(k).To(Equal(key), "%s held by keys %s and %s", ip, k, key)
		}
		addrOfKey[key], keyOfAddr[ip] = ip, key
		shownBy[ip] = append(shownBy[ip], ns+"/"+svc)
	}
	var list paasv1.IPList
	g.Expect(k8s.List(context.Background(), &list)).To(Succeed())
	inLedger := map[string][]string{}
	for _, ip := range list.Items {
		for _, o := range ledgerrules.Holders(&ip) {
			if o.Namespace == ns {
				inLedger[ip.Spec.Address] = append(inLedger[ip.Spec.Address], o.Namespace+"/"+o.Name)
			}
		}
	}
	for ip := range shownBy {
		slices.Sort(shownBy[ip])
		slices.Sort(inLedger[ip])
	}
	g.Expect(inLedger).To(Equal(shownBy))
}
