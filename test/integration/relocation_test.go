//go:build envtest

package integration

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// watchInvariants polls the Services of ns until the returned function is
// called, and records every moment an address shows in two statuses or a
// Service that was served shows none. The function returns what it saw.
func watchInvariants(ns string) func() []string {
	stop, done := make(chan struct{}), make(chan struct{})
	var violations []string
	served := map[string]bool{}
	go func() {
		defer GinkgoRecover()
		defer close(done)
		for {
			select {
			case <-stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
			var list corev1.ServiceList
			if err := k8s.List(context.Background(), &list, client.InNamespace(ns)); err != nil {
				continue
			}
			owner := map[string]string{}
			for _, s := range list.Items {
				ips := ingressIPs(&s)
				if len(ips) == 0 && served[s.Name] {
					violations = append(violations, fmt.Sprintf("%s was served and has no IP", s.Name))
				}
				served[s.Name] = served[s.Name] || len(ips) > 0
				for _, ip := range ips {
					if other, dup := owner[ip]; dup {
						violations = append(violations, fmt.Sprintf("%s held by %s and %s", ip, other, s.Name))
					}
					owner[ip] = s.Name
				}
			}
		}
	}()
	return func() []string {
		close(stop)
		<-done
		return violations
	}
}

// editIPGroup applies edit to the IPGroup called name, retrying on conflicts.
func editIPGroup(name string, edit func(*paasv1.IPGroup)) {
	EventuallyWithOffset(1, func() error {
		var g paasv1.IPGroup
		if err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, &g); err != nil {
			return err
		}
		edit(&g)
		return k8s.Update(context.Background(), &g)
	}).Should(Succeed())
}

// editService applies edit to s, retrying on conflicts.
func editService(s *corev1.Service, edit func(*corev1.Service)) {
	EventuallyWithOffset(1, func() error {
		got := &corev1.Service{}
		if err := k8s.Get(context.Background(), client.ObjectKeyFromObject(s), got); err != nil {
			return err
		}
		edit(got)
		return k8s.Update(context.Background(), got)
	}).Should(Succeed())
}

// eventuallyRelocating waits until the IPGroup reports n Services still to move.
func eventuallyRelocating(name string, n int) {
	EventuallyWithOffset(1, func(g Gomega) {
		var group paasv1.IPGroup
		g.Expect(k8s.Get(context.Background(), types.NamespacedName{Name: name}, &group)).To(Succeed())
		g.Expect(group.Status.Relocating).To(BeEquivalentTo(n))
	}).Should(Succeed())
}

// ledgerOwnedBy returns the ledger's addresses owned by Service ns/name.
func ledgerOwnedBy(ns, name string) []string {
	var out []string
	for _, ip := range ledger() {
		if o := ip.Spec.Owner; o != nil && o.Namespace == ns && o.Name == name {
			out = append(out, ip.Spec.Address)
		}
	}
	slices.Sort(out)
	return out
}

func kubectlGetIPG(name string) string {
	kubeconfig, err := env.KubeconfigFile(tempDir)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	out, err := exec.Command(filepath.Join(env.Root, "bin", "k8s", "kubectl"), "--kubeconfig", kubeconfig, "get", "ipg", name).CombinedOutput()
	ExpectWithOffset(1, err).NotTo(HaveOccurred(), string(out))
	return string(out)
}

var _ = Describe("relocation", func() {
	It("moves an appliance to a new site by editing its IPGroup and then the requests, announced and explained", func() {
		createIPGroup(newIPGroup("appliance-ext", "192.0.2.0/24", "192.0.2.0", "192.0.2.255"))
		internal := newIPGroup("appliance-int", "203.0.113.0/28")
		internal.Spec.AutoAssign = new(false)
		createIPGroup(internal)
		ns := newNamespace(nil)

		api := createService(testenv.LoadBalancerService(ns, "api", withAnnotation(paasv1.IPsAnnotation, "192.0.2.10")))
		ingress := createService(testenv.LoadBalancerService(ns, "ingress", withLoadBalancerIP("192.0.2.11")))
		eventuallyIPs(api, "192.0.2.10")
		eventuallyIPs(ingress, "192.0.2.11")
		web := createService(testenv.LoadBalancerService(ns, "web"))
		eventuallyIPs(web, "192.0.2.1")
		db := createService(testenv.LoadBalancerService(ns, "db"))
		eventuallyIPs(db, "192.0.2.2")
		inside := createService(testenv.LoadBalancerService(ns, "inside", withAnnotation(paasv1.IPGroupAnnotation, "appliance-int")))
		eventuallyIPs(inside, "203.0.113.0")
		insideUID := getService(inside).UID
		check := watchInvariants(ns)
		order := recordMoves(ns)

		By("moving the external segment: every Service keeps its address until the admin releases them")
		editIPGroup("appliance-ext", func(g *paasv1.IPGroup) {
			g.Spec.Segment, g.Spec.ExcludedIPs = "198.51.100.0/24", []string{"198.51.100.0", "198.51.100.255"}
		})
		kept := eventuallyKept("appliance-ext", paasv1.ReasonKeptUntilReleased)
		Expect(kept.Message).To(HavePrefix("4 Service(s) keep addresses the group no longer allows (segment, addresses or excludedIPs changed): " +
			ns + "/api (192.0.2.10), " + ns + "/db (192.0.2.2), " + ns + "/ingress (192.0.2.11), " + ns + "/web (192.0.2.1); set vip.paas.org/release-addresses=true"))
		c := eventuallyCondition(web, metav1.ConditionTrue, paasv1.ReasonAddressKept)
		Expect(c.Message).To(Equal("holds 192.0.2.1; keeps 192.0.2.1, which IPGroup appliance-ext no longer allows (excluded, outside its segment or addresses, or the group is being deleted) until the group's admin sets vip.paas.org/release-addresses=true on it, or the Service asks for another address"))
		eventuallyEvent(web, corev1.EventTypeWarning, service.EventAddressKept, "keeps 192.0.2.1, which IPGroup appliance-ext no longer allows")
		Consistently(func() []string { return append(ingressIPs(getService(web)), ingressIPs(getService(db))...) }, "1s").
			Should(Equal([]string{"192.0.2.1", "192.0.2.2"}))
		eventuallyRelocating("appliance-ext", 4)

		By("released: auto-assigned Services follow at once")
		releaseAddresses("appliance-ext")
		Eventually(func(g Gomega) {
			g.Expect(append(ingressIPs(getService(web)), ingressIPs(getService(db))...)).To(ConsistOf("198.51.100.1", "198.51.100.2"))
		}).Should(Succeed())
		webNow := ingressIPs(getService(web))[0]
		eventuallyEvent(web, corev1.EventTypeNormal, service.EventIPChanged, "Changed 192.0.2.1 → "+webNow+" (IPGroup appliance-ext)")
		c = eventuallyCondition(web, metav1.ConditionTrue, paasv1.ReasonAllocated)
		Expect(c.Message).To(Equal("holds " + webNow + " from IPGroup appliance-ext"))
		Eventually(func() []string { return ledgerOwnedBy(ns, "web") }).Should(Equal([]string{webNow}), "the old ledger object is released")
		Expect(ledger()[webNow].Labels).To(HaveKeyWithValue(paasv1.IPGroupLabel, "appliance-ext"))

		By("Services whose requests are now outside every group keep their IPs and say what to change")
		c = eventuallyCondition(api, metav1.ConditionFalse, paasv1.ReasonRequestedIPOutsideGroups)
		Expect(c.Message).To(Equal("requested 192.0.2.10 is in no IPGroup; request an address inside an IPGroup's segment or create an IPGroup that holds it (keeps 192.0.2.10 meanwhile)"))
		eventuallyCondition(ingress, metav1.ConditionFalse, paasv1.ReasonRequestedIPOutsideGroups)
		eventuallyEvent(api, corev1.EventTypeWarning, service.EventAllocationFailed, "requested 192.0.2.10 is in no IPGroup")
		Consistently(func() []string { return append(ingressIPs(getService(api)), ingressIPs(getService(ingress))...) }, "1s").
			Should(Equal([]string{"192.0.2.10", "192.0.2.11"}))
		Expect(ledgerOwnedBy(ns, "api")).To(Equal([]string{"192.0.2.10"}))

		By("kubectl get ipg shows the two still to move")
		eventuallyRelocating("appliance-ext", 2)
		out := kubectlGetIPG("appliance-ext")
		Expect(out).To(MatchRegexp(`NAME\s+SEGMENT\s+MODE\s+ALLOCATED\s+CAPACITY\s+READY\s+RELOCATING`))
		Expect(out).To(MatchRegexp(`appliance-ext\s+198.51.100.0/24\s+L2\s+2\s+254\s+True\s+2`))

		By("fixing the requests moves them, and releases the old addresses")
		editService(api, func(s *corev1.Service) { s.Annotations[paasv1.IPsAnnotation] = "198.51.100.10" })
		editService(ingress, func(s *corev1.Service) { s.Spec.LoadBalancerIP = "198.51.100.11" })
		eventuallyIPs(api, "198.51.100.10")
		eventuallyIPs(ingress, "198.51.100.11")
		eventuallyEvent(api, corev1.EventTypeNormal, service.EventIPChanged, "Changed 192.0.2.10 → 198.51.100.10 (IPGroup appliance-ext)")
		eventuallyEvent(ingress, corev1.EventTypeNormal, service.EventIPChanged, "Changed 192.0.2.11 → 198.51.100.11")
		eventuallyCondition(api, metav1.ConditionTrue, paasv1.ReasonAllocated)
		eventuallyCondition(ingress, metav1.ConditionTrue, paasv1.ReasonAllocated)
		Eventually(func() []string { return ledgerOwnedBy(ns, "api") }).Should(Equal([]string{"198.51.100.10"}))
		Eventually(ledger).ShouldNot(HaveKey("192.0.2.11"))
		eventuallyRelocating("appliance-ext", 0)
		Expect(kubectlGetIPG("appliance-ext")).To(MatchRegexp(`appliance-ext\s+198.51.100.0/24\s+L2\s+4\s+254\s+True\s+0`))

		By("the internal Service never moved, and no address was ever held twice or dropped")
		got := getService(inside)
		Expect(ingressIPs(got)).To(Equal([]string{"203.0.113.0"}))
		Expect(got.UID).To(Equal(insideUID))
		Expect(check()).To(BeEmpty())
		moves, wrong := order.check()
		Expect(wrong).To(BeEmpty(), "ledger create → status → ledger delete, for every move")
		Expect(moves).To(Equal(4))
		Expect(metricValue("vip_allocator_relocations_total", "appliance-ext")).To(BeNumerically(">=", 4))
		Eventually(func() float64 { return metricValue("vip_allocator_services_relocating", "appliance-ext") }).Should(BeZero())
		held := holdings(ns)
		Eventually(func(g Gomega) { expectConsistent(g, ns, held) }).Should(Succeed())
	})

	It("moves Services off newly excluded IPs, to the requested IP when it is valid, else the next free one", func() {
		createIPGroup(newIPGroup("excl-edit", "203.0.113.64/28"))
		ns := newNamespace(nil)
		a := createService(testenv.LoadBalancerService(ns, "a"))
		eventuallyIPs(a, "203.0.113.64")
		b := createService(testenv.LoadBalancerService(ns, "b"))
		eventuallyIPs(b, "203.0.113.65")
		pinned := createService(testenv.LoadBalancerService(ns, "pinned", withAnnotation(paasv1.IPsAnnotation, "203.0.113.70")))
		eventuallyIPs(pinned, "203.0.113.70")
		check := watchInvariants(ns)

		editIPGroup("excl-edit", func(g *paasv1.IPGroup) { g.Spec.ExcludedIPs = []string{"203.0.113.65", "203.0.113.70"} })
		By("excluding addresses Services hold moves no one by itself: they are reported")
		kept := eventuallyKept("excl-edit", paasv1.ReasonKeptUntilReleased)
		Expect(kept.Message).To(HavePrefix("2 Service(s) keep addresses the group no longer allows (segment, addresses or excludedIPs changed): " +
			ns + "/b (203.0.113.65), " + ns + "/pinned (203.0.113.70);"))
		eventuallyCondition(b, metav1.ConditionTrue, paasv1.ReasonAddressKept)
		Consistently(func() []string { return append(ingressIPs(getService(b)), ingressIPs(getService(pinned))...) }, "1s").
			Should(Equal([]string{"203.0.113.65", "203.0.113.70"}))

		By("released: b, and the Service requesting a now excluded IP, move to the next free addresses; a keeps its own")
		releaseAddresses("excl-edit")
		Eventually(func(g Gomega) {
			g.Expect(append(ingressIPs(getService(b)), ingressIPs(getService(pinned))...)).To(ConsistOf("203.0.113.66", "203.0.113.67"))
		}).Should(Succeed())
		bNow, pinnedNow := ingressIPs(getService(b))[0], ingressIPs(getService(pinned))[0]
		eventuallyEvent(b, corev1.EventTypeNormal, service.EventIPChanged, "Changed 203.0.113.65 → "+bNow)
		eventuallyEvent(pinned, corev1.EventTypeNormal, service.EventIPChanged, "Changed 203.0.113.70 → "+pinnedNow)
		By("the one whose request is excluded hears why")
		c := eventuallyCondition(pinned, metav1.ConditionFalse, paasv1.ReasonRequestedIPExcluded)
		Expect(c.Message).To(Equal("requested 203.0.113.70 is excluded from IPGroup excl-edit (spec.excludedIPs); request another address (keeps " + pinnedNow + " from IPGroup excl-edit meanwhile)"))
		Expect(ingressIPs(getService(a))).To(Equal([]string{"203.0.113.64"}))
		Eventually(ledger).ShouldNot(HaveKey("203.0.113.65"))
		Eventually(ledger).ShouldNot(HaveKey("203.0.113.70"))
		eventuallyRelocating("excl-edit", 0)
		eventuallyKept("excl-edit", paasv1.ReasonNoneKept)

		By("lifting the exclusion gives it its requested IP back")
		editIPGroup("excl-edit", func(g *paasv1.IPGroup) { g.Spec.ExcludedIPs = []string{"203.0.113.65"} })
		eventuallyIPs(pinned, "203.0.113.70")
		eventuallyCondition(pinned, metav1.ConditionTrue, paasv1.ReasonAllocated)
		Eventually(func() []string { return ledgerOwnedBy(ns, "pinned") }).Should(Equal([]string{"203.0.113.70"}))

		By("excluding an IP when the group has no other free one: the Service keeps it and says so")
		full := newIPGroup("excl-full", "192.0.2.128/31")
		full.Annotations = map[string]string{paasv1.ReleaseAddressesAnnotation: "true"} // released beforehand
		createIPGroup(full)
		x := createService(testenv.LoadBalancerService(ns, "x", withAnnotation(paasv1.IPGroupAnnotation, "excl-full")))
		eventuallyIPs(x, "192.0.2.128")
		y := createService(testenv.LoadBalancerService(ns, "y", withAnnotation(paasv1.IPGroupAnnotation, "excl-full")))
		eventuallyIPs(y, "192.0.2.129")
		editIPGroup(full.Name, func(g *paasv1.IPGroup) { g.Spec.ExcludedIPs = []string{"192.0.2.128"} })
		c = eventuallyCondition(x, metav1.ConditionFalse, paasv1.ReasonIPGroupFull)
		Expect(c.Message).To(HavePrefix("192.0.2.128 is no longer allowed by an IPGroup that admits this Service"))
		Expect(c.Message).To(HaveSuffix("(keeps 192.0.2.128 meanwhile)"))
		eventuallyRelocating(full.Name, 1)
		Expect(metricValue("vip_allocator_services_relocating", full.Name)).To(BeEquivalentTo(1))
		By("and moves as soon as an address is free")
		Expect(k8s.Delete(context.Background(), getService(y))).To(Succeed())
		eventuallyIPs(x, "192.0.2.129")
		eventuallyRelocating(full.Name, 0)
		Expect(check()).To(BeEmpty())
	})

})

var _ = Describe("relocation by selectors", func() {
	It("moves Services a group stops admitting, when its selector or their namespace's labels change", func() {
		ctx := context.Background()
		blue := newIPGroup("team-blue", "198.51.100.32/28")
		blue.Spec.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"team": "blue"}}
		createIPGroup(blue)
		shared := newIPGroup("shared-pool", "203.0.113.32/28")
		shared.Spec.Priority = 10
		createIPGroup(shared)
		ns := newNamespace(map[string]string{"team": "blue"})
		svc := createService(testenv.LoadBalancerService(ns, "app", withLabels(map[string]string{"tier": "front"})))
		eventuallyIPs(svc, "198.51.100.32")
		check := watchInvariants(ns)

		By("the namespace loses the label the group selects on")
		var nsObj corev1.Namespace
		Expect(k8s.Get(ctx, types.NamespacedName{Name: ns}, &nsObj)).To(Succeed())
		nsObj.Labels["team"] = "red"
		Expect(k8s.Update(ctx, &nsObj)).To(Succeed())
		eventuallyIPs(svc, "203.0.113.32")
		eventuallyEvent(svc, corev1.EventTypeNormal, service.EventIPChanged, "Changed 198.51.100.32 → 203.0.113.32 (IPGroup shared-pool)")

		By("a group's serviceSelector stops matching")
		editIPGroup("shared-pool", func(g *paasv1.IPGroup) {
			g.Spec.ServiceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"tier": "back"}}
		})
		c := eventuallyCondition(svc, metav1.ConditionFalse, paasv1.ReasonNoIPGroup)
		Expect(c.Message).To(HavePrefix("203.0.113.32 is no longer allowed by an IPGroup that admits this Service"))
		Expect(ingressIPs(getService(svc))).To(Equal([]string{"203.0.113.32"}), "it keeps its IP: no group admits it")
		By("and the namespace gets its label back")
		Expect(k8s.Get(ctx, types.NamespacedName{Name: ns}, &nsObj)).To(Succeed())
		nsObj.Labels["team"] = "blue"
		Expect(k8s.Update(ctx, &nsObj)).To(Succeed())
		eventuallyIPs(svc, "198.51.100.32")
		eventuallyCondition(svc, metav1.ConditionTrue, paasv1.ReasonAllocated)
		Expect(check()).To(BeEmpty())
	})
})

var _ = Describe("relocation across operator restarts", Ordered, func() {
	It("finishes a move a crash interrupted, on the address it had already taken", func() {
		ctx := context.Background()
		createIPGroup(newIPGroup("crash", "198.51.100.192/28"))
		ns := newNamespace(nil)
		stopOperator()
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				runOperator()
			}
		})

		By("leaving the state a crash leaves: the new ledger object created, the status patched or not, the old ledger object still there")
		crash := func(name, status string, ledgerAddrs ...string) *corev1.Service {
			svc := createService(testenv.LoadBalancerService(ns, name))
			patch := client.MergeFrom(svc.DeepCopy())
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: status}}
			Expect(env.Operator.Status().Patch(ctx, svc, patch)).To(Succeed()) // as the crashed operator wrote it
			for _, a := range ledgerAddrs {
				ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: a, Annotations: map[string]string{paasv1.OwnerAnnotation: ns + "/" + name}},
					Spec: paasv1.IPSpec{Address: a, Owner: &paasv1.IPOwner{Namespace: ns, Name: name, UID: svc.UID}}}
				if addr(a).Is4() && netipIn(a, "198.51.100.192/28") {
					ip.Labels = map[string]string{paasv1.IPGroupLabel: "crash"}
					ip.Spec.IPGroup = "crash"
				}
				Expect(env.Operator.Create(ctx, ip)).To(Succeed())
				DeferCleanup(func() { Expect(client.IgnoreNotFound(env.Operator.Delete(ctx, ip))).To(Succeed()) })
			}
			return svc
		}
		beforePatch := crash("before-patch", "192.0.2.201", "192.0.2.201", "198.51.100.197")
		afterPatch := crash("after-patch", "198.51.100.198", "192.0.2.202", "198.51.100.198")

		By("the restarted operator finishes both moves and takes nothing else")
		runOperator()
		restarted = true
		eventuallyIPs(beforePatch, "198.51.100.197")
		eventuallyIPs(afterPatch, "198.51.100.198")
		Eventually(func() []string { return ledgerOwnedBy(ns, "before-patch") }).Should(Equal([]string{"198.51.100.197"}))
		Eventually(func() []string { return ledgerOwnedBy(ns, "after-patch") }).Should(Equal([]string{"198.51.100.198"}))
		eventuallyEvent(beforePatch, corev1.EventTypeNormal, service.EventIPChanged, "Changed 192.0.2.201 → 198.51.100.197")
		eventuallyRelocating("crash", 0)
		fresh := createService(testenv.LoadBalancerService(ns, "fresh"))
		eventuallyIPs(fresh, "198.51.100.192")
	})

	It("never drops or doubles an IP when stopped in the middle of a mass relocation, and finishes it after the restart", func() {
		const total = 200
		createIPGroup(newIPGroup("mass", "192.0.2.0/24"))
		ns := newNamespace(nil)
		createServices(ns, "svc", 0, total)
		Eventually(func() int { return len(holdings(ns)) }, "120s").Should(Equal(total))
		check := watchInvariants(ns)
		order := recordMoves(ns)

		By("moving the segment and stopping the operator mid-move")
		editIPGroup("mass", func(g *paasv1.IPGroup) {
			g.Spec.Segment = "198.51.100.0/24"
			g.Annotations = map[string]string{paasv1.ReleaseAddressesAnnotation: "true"}
		})
		movedCount := func() int {
			n := 0
			for _, ips := range holdings(ns) {
				if netipIn(ips[0], "198.51.100.0/24") {
					n++
				}
			}
			return n
		}
		Eventually(movedCount, "60s", "20ms").Should(BeNumerically(">=", 5))
		stopOperator()
		moved := movedCount()
		GinkgoWriter.Printf("stopped with %d of %d moved\n", moved, total)
		Expect(moved).To(BeNumerically("<", total), "the stop must land mid-move")
		Expect(holdings(ns)).To(HaveLen(total), "no Service lost its IP")

		By("restarting: every Service ends in the new segment, once")
		runOperator()
		Eventually(movedCount, "120s", "200ms").Should(Equal(total))
		Eventually(func(g Gomega) { expectConsistent(g, ns, holdings(ns)) }, "60s").Should(Succeed())
		eventuallyRelocating("mass", 0)
		Expect(check()).To(BeEmpty())
		moves, wrong := order.check()
		Expect(wrong).To(BeEmpty(), "ledger create → status → ledger delete, for every move, across the restart")
		Expect(moves).To(Equal(total), "each Service moved once")
	})
})
