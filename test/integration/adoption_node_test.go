//go:build envtest

package integration

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// MetalLB's speakers say which node answers ARP for a Service (a ServiceL2Status, MetalLB's
// own CRD from its module). The operator records that node on the ledger when it adopts the
// address, so the agents elect it and the router's ARP entry does not move at the switch; once
// another node announces the address, the operator forgets it.
var _ = Describe("an address adopted from MetalLB's layer-2 node", func() {
	It("records MetalLB's node at the adoption and forgets it once another node announces the address", func() {
		const vip = "198.51.100.141"
		ctx := context.Background()
		installMetalLBL2StatusCRD(ctx)
		ns := newNamespace(nil)
		// What MetalLB's speaker on node-a wrote: the status in its own namespace, and a
		// stale one of another Service, which must not count.
		mlb := newNamespace(nil)
		servedByMetalLB(vip, func() {
			createL2Status(ctx, mlb, ns, "web", "node-a")
			createL2Status(ctx, mlb, ns, "other", "node-b")
		}, testenv.LoadBalancerService(ns, "web"))

		createIPGroup(newIPGroup("adopt-node", "198.51.100.128/26"))
		ledger := func() *paasv1.IP {
			ip := &paasv1.IP{}
			Expect(k8s.Get(ctx, client.ObjectKey{Name: vip}, ip)).To(Succeed())
			return ip
		}
		Eventually(func(g Gomega) {
			ip := &paasv1.IP{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: vip}, ip)).To(Succeed())
			g.Expect(ip.Spec.AdoptedFromNode).To(Equal("node-a"))
			g.Expect(ip.Status.AnnouncedBy).To(Equal([]string{"node-a"}))
		}).Should(Succeed())
		Consistently(func() string { return ledger().Spec.AdoptedFromNode }).WithTimeout(2*time.Second).Should(Equal("node-a"),
			"node-a announces the address it was adopted from")

		By("another node announces it: the operator forgets node-a")
		agent, err := client.New(env.AgentConfig("node-b"), client.Options{Scheme: paasv1.NewScheme()})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			ip := ledger()
			patch := client.MergeFromWithOptions(ip.DeepCopy(), client.MergeFromWithOptimisticLock{})
			ip.Status.AnnouncedBy = []string{"node-b"}
			return agent.Status().Patch(ctx, ip, patch)
		}).Should(Succeed())
		Eventually(func() string { return ledger().Spec.AdoptedFromNode }).Should(BeEmpty())
	})
})

// installMetalLBL2StatusCRD creates MetalLB's ServiceL2Status CRD as its module ships it
// (hack/metallb.sh copies it into bin/metallb/crd), once per API server.
func installMetalLBL2StatusCRD(ctx context.Context) {
	f := filepath.Join(testenv.RepoRoot(), "bin", "metallb", "crd", "metallb.io_servicel2statuses.yaml")
	data, err := os.ReadFile(f)
	Expect(err).NotTo(HaveOccurred(), "run 'make metallb' (hack/metallb.sh)")
	if err := env.ApplyYAML(ctx, data); err != nil && !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
}

// createL2Status creates a ServiceL2Status in ns as MetalLB's speaker on node writes it for
// the Service svcNS/svcName, once the API server serves the CRD.
func createL2Status(ctx context.Context, ns, svcNS, svcName, node string) {
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta1", "kind": "ServiceL2Status",
		"metadata": map[string]any{"generateName": "l2-", "namespace": ns, "labels": map[string]any{
			"metallb.io/node": node, "metallb.io/service-name": svcName, "metallb.io/service-namespace": svcNS}},
	}}
	Eventually(func() error { return k8s.Create(ctx, s) }).Should(Succeed())
	Expect(unstructured.SetNestedMap(s.Object, map[string]any{"node": node, "serviceName": svcName, "serviceNamespace": svcNS}, "status")).To(Succeed())
	Expect(k8s.Status().Update(ctx, s)).To(Succeed())
}
