//go:build envtest

package integration

import (
	"context"
	"slices"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// The operator started over what the original paas.org operator left (its
// webhook already gone, so without "migrate upgrade" having run): the install
// test covers the full upgrade, this the operator's own part at start.
var _ = Describe("the original operator's Services, adopted at start", Ordered, func() {
	ctx := context.Background()

	// asOriginal writes svc and its ledger object the way the original's
	// Service controller did: ledger (label ipgroup, owner annotation, no spec)
	// when ip is set, status only when shown, then the finalizer. The ledger
	// is written with the operator's identity only because the admission
	// policy lets nobody else; its content is the original's.
	asOriginal := func(svc *corev1.Service, group, ip string, shown bool) *corev1.Service {
		Expect(k8s.Create(ctx, svc)).To(Succeed())
		if ip != "" {
			Expect(env.Operator.Create(ctx, &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: ip,
				Labels:      map[string]string{paasv1.IPGroupLabel: group},
				Annotations: map[string]string{paasv1.OwnerAnnotation: svc.Namespace + "/" + svc.Name}}})).To(Succeed())
		}
		if shown {
			// The operator's identity again: the status of a Service we serve
			// is its alone now (admission policy), the content the original's.
			patch := client.MergeFrom(svc.DeepCopy())
			svc.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: ip}}
			Expect(env.Operator.Status().Patch(ctx, svc, patch)).To(Succeed())
		}
		svc.Finalizers = append(svc.Finalizers, paasv1.OriginalServiceFinalizer)
		Expect(k8s.Update(ctx, svc)).To(Succeed())
		return svc
	}

	It("keeps every address, adopts the ledger in place, drops the finalizer and lets a deleting Service go", func() {
		stopOperator()
		restarted := false
		DeferCleanup(func() {
			if !restarted {
				runOperator()
			}
		})
		createIPGroup(newIPGroup("original", "10.231.0.0/24", "10.231.0.0"))
		ns := newNamespace(nil)
		api := asOriginal(testenv.LoadBalancerService(ns, "api"), "original", "10.231.0.5", true)
		// The original crashed between its ledger write and its status write.
		crashed := asOriginal(testenv.LoadBalancerService(ns, "crashed"), "original", "10.231.0.6", false)
		old := asOriginal(testenv.LoadBalancerService(ns, "old"), "original", "10.231.0.7", true)
		Expect(k8s.Delete(ctx, old)).To(Succeed())
		// The original put its finalizer on LoadBalancers of any class; this one is
		// another implementation's (no address here), and nothing else removes it.
		foreign := asOriginal(testenv.LoadBalancerService(ns, "foreign", withClass("example.com/other-lb")), "", "", false)
		uids := map[string]types.UID{}
		for name, ip := range ledger() {
			uids[name] = ip.UID
		}

		runOperator()
		restarted = true

		for _, c := range []struct {
			svc *corev1.Service
			ip  string
		}{{api, "10.231.0.5"}, {crashed, "10.231.0.6"}} {
			eventuallyIPs(c.svc, c.ip)
			Eventually(func(g Gomega) {
				svc := &corev1.Service{}
				g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(c.svc), svc)).To(Succeed())
				g.Expect(svc.Finalizers).NotTo(ContainElement(paasv1.OriginalServiceFinalizer))
				ip := ledger()[c.ip]
				g.Expect(ip.UID).To(Equal(uids[c.ip]), "ledger %s deleted and recreated", c.ip)
				g.Expect(ip.Spec.Owner).NotTo(BeNil())
				g.Expect(ip.Spec.Owner.UID).To(Equal(svc.UID))
				g.Expect(ip.Spec.Address).To(Equal(c.ip))
				g.Expect(ip.Spec.IPGroup).To(Equal("original"))
			}).Should(Succeed())
			eventuallyEvent(c.svc, corev1.EventTypeNormal, "IPAdopted", "Adopted "+c.ip)
		}
		Eventually(func(g Gomega) {
			g.Expect(apierrors.IsNotFound(k8s.Get(ctx, client.ObjectKeyFromObject(old), &corev1.Service{}))).To(BeTrue(), "old still there")
			g.Expect(ledger()).NotTo(HaveKey("10.231.0.7"))
			svc := &corev1.Service{}
			g.Expect(k8s.Get(ctx, client.ObjectKeyFromObject(foreign), svc)).To(Succeed())
			g.Expect(slices.Contains(svc.Finalizers, paasv1.OriginalServiceFinalizer)).To(BeFalse(), "foreign keeps the finalizer")
			g.Expect(svc.Status.LoadBalancer.Ingress).To(BeEmpty())
		}).Should(Succeed())

		// The released address is free: a Service asking for it gets it.
		eventuallyIPs(createService(testenv.LoadBalancerService(ns, "reuse", withLoadBalancerIP("10.231.0.7"))), "10.231.0.7")
	})
})
