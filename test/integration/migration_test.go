//go:build envtest

package integration

import (
	"bytes"
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/cmd"
	"github.com/paas-org/vip-allocator-operator/migration"
	"github.com/paas-org/vip-allocator-operator/test/operatortest"
)

// timeline polls one migration and records what a client of the Service and
// an operator watching the VirtualIP would see.
type timeline struct {
	mu        sync.Mutex
	states    []string
	heldAt    time.Time // the Service first held the IP
	lostAfter []string  // moments the Service did not hold the IP after it had
	cloneGone time.Time
	stop      chan struct{}
	done      chan struct{}
	stopWatch func()
	watchDone chan struct{}
}

var _ = Describe("migration of legacy VirtualIPs", func() {
	It("converts an annotated VirtualIP to a LoadBalancer Service with the same IP, with no gap, and can then delete it", func() {
		ctx := context.Background()
		ns := newNamespace(nil)
		createGSM("gsm-happy", "10.251.0.0/24", "10.251.0.1")
		web := legacyVIP{ns: ns, name: "web-vip", service: "web", ip: "10.251.0.10", gsm: "gsm-happy"}
		pinned := legacyVIP{ns: ns, name: "api-vip", service: "api", ip: "10.251.0.11", gsm: "gsm-happy", specIP: true}
		allowVirtualIPCreation(func() {
			createLegacy(web)
			createLegacy(pinned)
		})
		Consistently(func() string { return getVIP(ns, web.name).Status.State }, "1s").Should(Equal(paasv1.VirtualIPValid),
			"nothing happens without the annotation")

		By("annotating: kubectl annotate vip web-vip virtualips.paas.org/migrate=''")
		t := watchMigration(web)
		Expect(annotateMigrate(ns, web.name)).To(Succeed())
		eventuallyState(ns, web.name, paasv1.VirtualIPMigrated)
		t.finish()
		Eventually(func(g Gomega) { expectMigrated(g, web, "gsm-happy") }).Should(Succeed())

		By("an IPGroup made from the GSM: same segment and exclusions, and no other")
		group := &paasv1.IPGroup{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: "gsm-happy"}, group)).To(Succeed())
		Expect(group.Spec.Segment).To(Equal("10.251.0.0/24"))
		Expect(group.Spec.ExcludedIPs).To(Equal([]string{"10.251.0.1"}))
		Expect(group.Labels).To(HaveKeyWithValue(paasv1.CreatedFromGSMLabel, "gsm-happy"))

		By("intermediate states reported as the original did, the IP never leaving the Service, the clone going last")
		Expect(t.states).To(ContainElements(migration.StateConvertingService, migration.StateCuttingOver, paasv1.VirtualIPMigrated))
		Expect(t.states[0]).To(Equal(paasv1.VirtualIPValid))
		Expect(t.lostAfter).To(BeEmpty(), "the Service lost its IP after holding it")
		Expect(t.heldAt).NotTo(BeZero())
		Expect(t.cloneGone).NotTo(BeZero())
		// The cutover delay is 2 s and counted from a condition time of 1 s resolution.
		Expect(t.cloneGone.Sub(t.heldAt)).To(BeNumerically(">=", time.Second), "the clone went before the new path carried the IP")
		vip := getVIP(ns, web.name)
		cond := meta.FindStatusCondition(vip.Status.Conditions, paasv1.VirtualIPConditionMigrated)
		Expect(cond).NotTo(BeNil())
		Expect(cond.Status).To(Equal(metav1.ConditionTrue))
		eventuallyEvent(vip, corev1.EventTypeNormal, migration.EventMigrated, "holding 10.251.0.10")
		Expect(counter("vip_allocator_migration_steps_total", "action", "MarkMigrated")).To(BeNumerically(">=", 1))
		Expect(counter("vip_allocator_migration_steps_total", "action", "DeleteClone")).To(BeNumerically(">=", 1))
		eventuallyEvent(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}}, corev1.EventTypeNormal, "IPMigrated", "Took over 10.251.0.10 from VirtualIP "+ns+"/web-vip")

		By("a second VirtualIP of the same GSM reuses the group, and keeps spec.loadBalancerIP since it set spec.ip")
		Expect(annotateMigrate(ns, pinned.name)).To(Succeed())
		eventuallyState(ns, pinned.name, paasv1.VirtualIPMigrated)
		Eventually(func(g Gomega) { expectMigrated(g, pinned, "gsm-happy") }).Should(Succeed())
		var groups paasv1.IPGroupList
		Expect(k8s.List(ctx, &groups)).To(Succeed())
		Expect(groups.Items).To(HaveLen(1))

		By("running it again is harmless: nothing is written")
		svc := getService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"}})
		vipRV := getVIP(ns, web.name).ResourceVersion
		Expect(k8s.Patch(ctx, getVIP(ns, web.name), client.RawPatch("application/merge-patch+json",
			[]byte(`{"metadata":{"annotations":{"virtualips.paas.org/migrate":"again","touch":"1"}}}`)))).To(Succeed())
		Consistently(func() string { return getService(svc).ResourceVersion }, "2s").Should(Equal(svc.ResourceVersion))
		Expect(getVIP(ns, web.name).ResourceVersion).NotTo(Equal(vipRV)) // our own touch only
		Expect(getVIP(ns, web.name).Status.State).To(Equal(paasv1.VirtualIPMigrated))

		By("deleting the Migrated VirtualIP leaves the Service and its IP alone")
		ledgerRV := ledger()["10.251.0.10"].ResourceVersion
		Expect(k8s.Delete(ctx, getVIP(ns, web.name))).To(Succeed())
		Eventually(func() bool {
			return apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: web.name}, &paasv1.VirtualIP{}))
		}).Should(BeTrue())
		Consistently(func() []string { return ingressIPs(getService(svc)) }, "2s").Should(Equal([]string{"10.251.0.10"}))
		Expect(ledger()["10.251.0.10"].ResourceVersion).To(Equal(ledgerRV))
	})

	It("refuses clearly, changes nothing, and resumes by itself once the cause is fixed", func() {
		ctx := context.Background()
		ns := newNamespace(nil)
		createGSM("gsm-refusals", "10.252.0.0/24")
		createIPGroup(newIPGroup("other-lb", "10.252.1.0/24", "10.252.1.0"))
		busy := legacyVIP{ns: ns, name: "busy-vip", service: "busy", ip: "10.252.0.10", gsm: "gsm-refusals"}
		missing := legacyVIP{ns: ns, name: "missing-vip", service: "missing", ip: "10.252.0.11", gsm: "gsm-refusals", noService: true}
		invalid := legacyVIP{ns: ns, name: "invalid-vip", service: "invalid", ip: "10.252.0.12", gsm: "gsm-refusals", state: "Error", migrate: true}
		orphan := legacyVIP{ns: ns, name: "orphan-vip", service: "orphan", ip: "10.252.2.13", gsm: "gsm-gone"}
		allowVirtualIPCreation(func() {
			for _, l := range []legacyVIP{busy, missing, invalid, orphan} {
				createLegacy(l)
			}
		})
		By("the target Service is already a LoadBalancer with another IP")
		busySvc := getService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "busy"}})
		busySvc.Spec.Type = corev1.ServiceTypeLoadBalancer
		Expect(k8s.Update(ctx, busySvc)).To(Succeed())
		eventuallyIPs(busySvc, "10.252.1.1")

		for _, l := range []legacyVIP{busy, missing, orphan} {
			Expect(annotateMigrate(ns, l.name)).To(Succeed())
		}
		refused := map[string]string{
			busy.name:    "already a LoadBalancer with 10.252.1.1",
			missing.name: "Service " + ns + "/missing (spec.service) does not exist; create it",
			invalid.name: "not Valid",
			orphan.name:  "create an IPGroup whose segment holds 10.252.2.13",
		}
		for name, text := range refused {
			vip := eventuallyState(ns, name, paasv1.VirtualIPError)
			Expect(vip.Status.Message).To(ContainSubstring(text))
			eventuallyEvent(vip, corev1.EventTypeWarning, migration.EventMigrationBlocked, text)
		}
		By("nothing changed: clones, ledger objects and Services are as they were")
		for _, l := range []legacyVIP{busy, missing, invalid, orphan} {
			Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: l.name + paasv1.CloneServiceSuffix}, &corev1.Service{})).To(Succeed())
			Expect(ledger()[l.ip].Labels).To(HaveKeyWithValue(paasv1.LegacyGSMLabel, l.gsm))
			Expect(getVIP(ns, l.name).Finalizers).To(HaveLen(2))
		}
		Expect(ingressIPs(getService(busySvc))).To(Equal([]string{"10.252.1.1"}))
		var groups paasv1.IPGroupList
		Expect(k8s.List(ctx, &groups)).To(Succeed())
		Expect(groups.Items).To(HaveLen(1), "no IPGroup is made while refusing")

		By("fixing each cause: the migrations resume by themselves")
		busySvc = getService(busySvc)
		busySvc.Spec.Type = corev1.ServiceTypeClusterIP
		Expect(k8s.Update(ctx, busySvc)).To(Succeed())
		createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "missing"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
		vip := getVIP(ns, invalid.name)
		vip.Status.State = paasv1.VirtualIPValid // the legacy operator repaired it
		Expect(k8s.Status().Update(ctx, vip)).To(Succeed())
		createIPGroup(newIPGroup("orphans", "10.252.2.0/24"))
		for _, l := range []legacyVIP{busy, missing, invalid} {
			eventuallyState(ns, l.name, paasv1.VirtualIPMigrated)
			Eventually(func(g Gomega) { expectMigrated(g, l, "gsm-refusals") }).Should(Succeed())
		}
		eventuallyState(ns, orphan.name, paasv1.VirtualIPMigrated)
		Eventually(func(g Gomega) { expectMigrated(g, orphan, "orphans") }).Should(Succeed())
	})

	It("enforces the original webhook's rules in the API server", func() {
		ctx := context.Background()
		ns := newNamespace(nil)
		v := legacyVIP{ns: ns, name: "rules-vip", service: "rules", ip: "10.249.0.10", gsm: "gsm-rules", noService: true}
		broken := legacyVIP{ns: ns, name: "broken-vip", service: "broken", ip: "10.249.0.11", gsm: "gsm-rules", state: "Error", noService: true}
		pinned := legacyVIP{ns: ns, name: "pinned-vip", service: "pinned", ip: "10.249.0.12", gsm: "gsm-rules", specIP: true, noService: true}
		allowVirtualIPCreation(func() {
			createLegacy(v)
			createLegacy(broken)
			createLegacy(pinned)
		})

		By("creating a VirtualIP is refused")
		err := k8s.Create(ctx, &paasv1.VirtualIP{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "new"}, Spec: paasv1.VirtualIPSpec{Service: "x"}})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("deprecated"))
		Expect(err.Error()).To(ContainSubstring("use a Service of type LoadBalancer"))

		By("migration can start only from Valid")
		err = annotateMigrate(ns, broken.name)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring(`only a Valid VirtualIP can be migrated`))

		By("spec.ip is immutable, set or not")
		err = patchVIP(ns, pinned.name, `{"spec":{"ip":"10.249.0.99"}}`)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		err = patchVIP(ns, pinned.name, `{"spec":{"ip":null}}`)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		err = patchVIP(ns, v.name, `{"spec":{"ip":"10.249.0.10"}}`)
		Expect(apierrors.IsInvalid(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("ip is immutable"))

		By("spec.service may change before the migration, not during it")
		Expect(patchVIP(ns, v.name, `{"spec":{"service":"renamed"}}`)).To(Succeed())
		Expect(annotateMigrate(ns, v.name)).To(Succeed())
		err = patchVIP(ns, v.name, `{"spec":{"service":"rules"}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("spec.service cannot change"))

		By("the migrate annotation cannot be removed once set")
		err = patchVIP(ns, v.name, `{"metadata":{"annotations":{"virtualips.paas.org/migrate":null}}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("cannot be removed"))
		// Other edits stay possible during the migration.
		Expect(patchVIP(ns, v.name, `{"metadata":{"labels":{"team":"web"}}}`)).To(Succeed())
		Expect(getVIP(ns, v.name).Spec.Service).To(Equal("renamed"))

		By("the operator may delete clones of VirtualIPs, and no other Service")
		plain := createService(&corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "plain"},
			Spec: corev1.ServiceSpec{Ports: []corev1.ServicePort{{Port: 80}}}})
		err = env.Operator.Delete(ctx, plain)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("deletes only the keepalived clone Services of VirtualIPs"))
		clone := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: pinned.name + paasv1.CloneServiceSuffix}}
		Expect(env.Operator.Delete(ctx, clone)).To(Succeed())
	})

	It("plans without writing, and 'migrate all' annotates only what can go", func() {
		ctx := context.Background()
		ns := newNamespace(nil)
		createGSM("gsm-cli", "10.248.0.0/24")
		ready := legacyVIP{ns: ns, name: "ready-vip", service: "ready", ip: "10.248.0.10", gsm: "gsm-cli"}
		blocked := legacyVIP{ns: ns, name: "blocked-vip", service: "nowhere", ip: "10.248.0.11", gsm: "gsm-cli", noService: true}
		allowVirtualIPCreation(func() {
			createLegacy(ready)
			createLegacy(blocked)
		})
		before := map[string]string{}
		for _, l := range []legacyVIP{ready, blocked} {
			before[l.name] = getVIP(ns, l.name).ResourceVersion
		}
		var out bytes.Buffer
		plans, err := cmd.MigratePlan(ctx, env.AdminConfig, cmd.MigrateOptions{Namespace: ns}, &out)
		Expect(err).NotTo(HaveOccurred())
		GinkgoWriter.Println(out.String())
		Expect(plans).To(HaveLen(2))
		Expect(out.String()).To(ContainSubstring("create IPGroup gsm-cli (segment 10.248.0.0/24"))
		Expect(out.String()).To(ContainSubstring("make Service " + ns + "/ready type LoadBalancer with spec.loadBalancerIP 10.248.0.10"))
		Expect(out.String()).To(ContainSubstring("delete the keepalived clone Service " + ns + "/ready-vip-keepalived-clone"))
		Expect(out.String()).To(ContainSubstring("BLOCKED: Service " + ns + "/nowhere (spec.service) does not exist"))
		Expect(out.String()).To(ContainSubstring("2 VirtualIPs: 1 can migrate, 1 blocked"))
		for _, l := range []legacyVIP{ready, blocked} {
			Expect(getVIP(ns, l.name).ResourceVersion).To(Equal(before[l.name]), "plan wrote to %s", l.name)
		}
		Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKey{Name: "gsm-cli"}, &paasv1.IPGroup{}))).To(BeTrue())

		out.Reset()
		Expect(cmd.MigrateAll(ctx, env.AdminConfig, cmd.MigrateOptions{Namespace: ns}, &out)).To(Succeed())
		Expect(out.String()).To(ContainSubstring("annotated " + ns + "/ready-vip"))
		Expect(out.String()).To(ContainSubstring("skipped " + ns + "/blocked-vip"))
		eventuallyState(ns, ready.name, paasv1.VirtualIPMigrated)
		Eventually(func(g Gomega) { expectMigrated(g, ready, "gsm-cli") }).Should(Succeed())
		Expect(getVIP(ns, blocked.name).Annotations).NotTo(HaveKey(paasv1.MigrateAnnotation))
	})

	It("migrates 300 VirtualIPs at once: no IP changed, none doubled", func() {
		const n = 300
		ctx := context.Background()
		ns := newNamespace(nil)
		createGSM("gsm-bulk", "10.254.0.0/16")
		var ips []string
		for i := range n {
			ips = append(ips, fmt.Sprintf("10.254.%d.%d", 1+i/200, 1+i%200))
		}
		allowVirtualIPCreation(func() { createLegacyMany(ns, "gsm-bulk", ips) })

		// Watch every Service: once it holds an address it must be its VirtualIP's.
		var mu sync.Mutex
		var wrong []string
		stop := make(chan struct{})
		done := make(chan struct{})
		go func() {
			defer close(done)
			for {
				select {
				case <-stop:
					return
				case <-time.After(200 * time.Millisecond):
				}
				var list corev1.ServiceList
				if k8s.List(ctx, &list, client.InNamespace(ns)) != nil {
					continue
				}
				for _, s := range list.Items {
					var i int
					if _, err := fmt.Sscanf(s.Name, "svc-%d", &i); err != nil {
						continue
					}
					if got := ingressIPs(&s); len(got) > 0 && !slices.Equal(got, []string{ips[i]}) {
						mu.Lock()
						wrong = append(wrong, fmt.Sprintf("%s holds %v, its VirtualIP %s", s.Name, got, ips[i]))
						mu.Unlock()
					}
				}
			}
		}()
		start := time.Now()
		var wg sync.WaitGroup
		for i := range n {
			wg.Add(1)
			go func() {
				defer GinkgoRecover()
				defer wg.Done()
				Expect(annotateMigrate(ns, fmt.Sprintf("vip-%d", i))).To(Succeed())
			}()
		}
		wg.Wait()
		Eventually(func(g Gomega) {
			var list paasv1.VirtualIPList
			g.Expect(k8s.List(ctx, &list, client.InNamespace(ns))).To(Succeed())
			migrated := 0
			for _, v := range list.Items {
				if v.Status.State == paasv1.VirtualIPMigrated {
					migrated++
				}
			}
			g.Expect(migrated).To(Equal(n))
		}, "240s", "1s").Should(Succeed())
		GinkgoWriter.Printf("%d VirtualIPs migrated in %s\n", n, time.Since(start).Round(time.Millisecond))
		close(stop)
		<-done
		Expect(wrong).To(BeEmpty())
		held := holdings(ns)
		Expect(held).To(HaveLen(n))
		for i := range n {
			Expect(held[fmt.Sprintf("svc-%d", i)]).To(Equal([]string{ips[i]}))
		}
		Eventually(func(g Gomega) { expectConsistent(g, ns, held) }).Should(Succeed())
		var clones corev1.ServiceList
		Expect(k8s.List(ctx, &clones, client.InNamespace(ns))).To(Succeed())
		Expect(clones.Items).To(HaveLen(n), "only the n target Services remain")
	})
})

var _ = Describe("migration across operator restarts", Ordered, func() {
	// One run per action: the operator stops right after that action's write
	// (before it reports anything), a new one starts and must finish correctly.
	for i, action := range migration.Actions {
		It(fmt.Sprintf("finishes when the operator dies right after %s", action), func() {
			ctx := context.Background()
			ns := newNamespace(nil)
			gsm := fmt.Sprintf("gsm-restart-%d", i)
			createGSM(gsm, fmt.Sprintf("10.253.%d.0/24", i))
			l := legacyVIP{ns: ns, name: "vip", service: "svc", ip: fmt.Sprintf("10.253.%d.7", i), gsm: gsm}
			allowVirtualIPCreation(func() { createLegacy(l) })

			stopOperator()
			DeferCleanup(func() {
				if stopOp == nil { // the test failed with the operator down
					runOperator()
				}
			})
			crashed := make(chan struct{})
			var dead atomic.Bool
			options := operatorOptions
			// Once the stop is injected the operator makes no further step, as
			// if the process had died right after that write.
			options.Migration.AfterAction = func(_ context.Context, vip types.NamespacedName, a migration.Action) error {
				if vip.Namespace == ns && a == action && !dead.Swap(true) {
					close(crashed)
				}
				if dead.Load() {
					return fmt.Errorf("injected stop after %s", action)
				}
				return nil
			}
			stop, err := operatortest.Start(env.OperatorConfig, options)
			Expect(err).NotTo(HaveOccurred())
			Expect(annotateMigrate(ns, l.name)).To(Succeed())
			Eventually(crashed, "60s").Should(BeClosed())
			Expect(stop()).To(Succeed())

			By("while it is down the IP is held once: by the ledger object, the Service at most")
			ip := ledger()[l.ip]
			Expect(ip.Name).To(Equal(l.ip), "the ledger object must survive every step")
			var list corev1.ServiceList
			Expect(k8s.List(ctx, &list)).To(Succeed())
			holders := 0
			for _, s := range list.Items {
				if slices.Contains(ingressIPs(&s), l.ip) {
					holders++
					Expect(s.Namespace + "/" + s.Name).To(Equal(ns + "/svc"))
				}
			}
			Expect(holders).To(BeNumerically("<=", 1))
			Expect(getVIP(ns, l.name).Status.State).NotTo(Equal(paasv1.VirtualIPMigrated))

			By("a new operator finishes the migration")
			runOperator()
			eventuallyState(ns, l.name, paasv1.VirtualIPMigrated)
			Eventually(func(g Gomega) { expectMigrated(g, l, gsm) }).Should(Succeed())
		})
	}
})

// counter reads a counter of the in-process operator's metrics registry.
func counter(name, label, value string) float64 {
	families, err := metrics.Registry.Gather()
	Expect(err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetCounter().GetValue()
				}
			}
		}
	}
	return 0
}
