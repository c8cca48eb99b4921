//go:build envtest

package integration

import (
	"context"
	"slices"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/intstr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// An address MetalLB wrote, adopted when 'migrate metallb apply' creates its IPGroup: kube-proxy
// forwards it (ipMode VIP) until the operator writes Proxy, and the operator does that only once
// the node announcing it (here node-a, named by the suite's stand-in announcer) reports its data
// path carries it. Another node's report does not count, and no node may report for another.
var _ = Describe("an adopted address handed from kube-proxy to the agents", func() {
	It("writes ipMode Proxy only once the node announcing it reports it programmed", func() {
		const vip = "198.51.100.77"
		ctx := context.Background()
		By("adopting: ipMode VIP stays, the ledger awaits the data path")
		ns := newNamespace(nil)
		// Two Services share the address (MetalLB's allow-shared-ip): both wait, and the mark
		// goes only once both show Proxy.
		shared := withAnnotation(paasv1.MetalLBSharingAnnotation, "web")
		dns := testenv.LoadBalancerService(ns, "dns", shared)
		dns.Spec.Ports = []corev1.ServicePort{{Name: "dns", Port: 53, Protocol: corev1.ProtocolUDP, TargetPort: intstr.FromInt32(5353)}}
		served := servedByMetalLB(vip, nil, testenv.LoadBalancerService(ns, "web", shared), dns)
		svc, dns := served[0], served[1]

		createIPGroup(newIPGroup("adopt-lan", "198.51.100.64/26"))
		ip := &paasv1.IP{}
		Eventually(func(g Gomega) {
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: vip}, ip)).To(Succeed())
			g.Expect(ip.Spec.AwaitingDataPath).To(BeTrue())
			g.Expect(ip.Annotations).To(HaveKey(paasv1.AdoptedAnnotation))
			g.Expect(ip.Status.AnnouncedBy).To(Equal([]string{"node-a"}))
			g.Expect(ip.Spec.SharedWith).To(HaveLen(1))
		}).Should(Succeed())
		modes := func() []corev1.LoadBalancerIPMode {
			return []corev1.LoadBalancerIPMode{ipModeOf(getService(svc)), ipModeOf(getService(dns))}
		}
		vips := []corev1.LoadBalancerIPMode{corev1.LoadBalancerIPModeVIP, corev1.LoadBalancerIPModeVIP}
		Consistently(modes).WithTimeout(2 * time.Second).Should(Equal(vips))

		By("a report from a node that does not announce the address does not count")
		reportProgrammed("node-b", vip, "node-b")
		Consistently(modes).WithTimeout(2 * time.Second).Should(Equal(vips))

		By("no agent reports for another node, or takes another node's report back")
		err := tryReportProgrammed("node-b", vip, func(by []string) []string { return append(by, "node-a") })
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "node-b naming node-a: %v", err)
		err = tryReportProgrammed("node-a", vip, func(by []string) []string {
			return slices.DeleteFunc(by, func(n string) bool { return n == "node-b" })
		})
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "node-a dropping node-b's report: %v", err)

		By("the owner's report: ipMode Proxy, then the mark cleared")
		reportProgrammed("node-a", vip, "node-a")
		Eventually(modes).Should(Equal([]corev1.LoadBalancerIPMode{corev1.LoadBalancerIPModeProxy, corev1.LoadBalancerIPModeProxy}))
		Eventually(func(g Gomega) {
			ip := &paasv1.IP{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: vip}, ip)).To(Succeed())
			g.Expect(ip.Spec.AwaitingDataPath).To(BeFalse())
		}).Should(Succeed())
		Expect(ingressIPs(getService(svc))).To(Equal([]string{vip}))
	})
})

// servedByMetalLB creates svcs while the operator is stopped and writes vip into their statuses
// as MetalLB did before the bundle was installed; more, if not nil, writes what else MetalLB
// wrote. Then the operator starts and takes the Services in.
func servedByMetalLB(vip string, more func(), svcs ...*corev1.Service) []*corev1.Service {
	ctx := context.Background()
	stopOperator()
	DeferCleanup(func() {
		if stopOp == nil {
			runOperator()
		}
	})
	var out []*corev1.Service
	for _, s := range svcs {
		out = append(out, createService(s))
	}
	restore, err := testenv.WithoutStatusPolicy(ctx, k8s)
	Expect(err).NotTo(HaveOccurred())
	for _, s := range out {
		Eventually(func() error {
			cur := getService(s)
			cur.Status.LoadBalancer.Ingress = []corev1.LoadBalancerIngress{{IP: vip}}
			return k8s.Status().Update(ctx, cur)
		}).Should(Succeed())
	}
	Expect(restore()).To(Succeed())
	if more != nil {
		more()
	}
	runOperator()
	for _, s := range out {
		Eventually(func() []string { return getService(s).Finalizers }).Should(ContainElement(service.CleanupFinalizer))
	}
	return out
}

// ipModeOf is the ipMode of the Service's one ingress entry (VIP when unset, as kube-proxy reads it).
func ipModeOf(s *corev1.Service) corev1.LoadBalancerIPMode {
	if len(s.Status.LoadBalancer.Ingress) != 1 || s.Status.LoadBalancer.Ingress[0].IPMode == nil {
		return corev1.LoadBalancerIPModeVIP
	}
	return *s.Status.LoadBalancer.Ingress[0].IPMode
}

// reportProgrammed adds node to vip's programmedBy as the agent of as.
func reportProgrammed(as, vip, node string) {
	Eventually(func() error {
		return tryReportProgrammed(as, vip, func(by []string) []string { return append(by, node) })
	}).Should(Succeed())
}

// tryReportProgrammed changes vip's programmedBy with edit, as the agent of node as.
func tryReportProgrammed(as, vip string, edit func([]string) []string) error {
	agent, err := client.New(env.AgentConfig(as), client.Options{Scheme: paasv1.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	ip := &paasv1.IP{}
	if err := agent.Get(context.Background(), client.ObjectKey{Name: vip}, ip); err != nil {
		return err
	}
	patch := client.MergeFromWithOptions(ip.DeepCopy(), client.MergeFromWithOptimisticLock{})
	ip.Status.ProgrammedBy = edit(slices.Clone(ip.Status.ProgrammedBy))
	return agent.Status().Patch(context.Background(), ip, patch)
}
