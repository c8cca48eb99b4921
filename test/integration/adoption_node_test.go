//go:build envtest

package integration

import (
	"context"
	"os"
	"path/filepath"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// MetalLB's speakers say which node answers ARP for a Service (a ServiceL2Status, MetalLB's
// own CRD from its module). The operator records that node on the ledger when it adopts the
// address, so the agents elect it and the router's ARP entry does not move at the switch. Only
// a speaker's own word counts: a status in MetalLB's namespace, labelled with the node it
// names and owned by the speaker pod on that node. The operator forgets the node once the
// election, as it computes it, gives the address to another node that announces it; an agent
// that writes itself in the node's place ends nothing.
var _ = Describe("an address adopted from MetalLB's layer-2 node", func() {
	It("records the node only MetalLB's own speaker names, and forgets it only once the election moves the address", func() {
		const vip = "198.51.100.141"
		ctx := context.Background()
		installMetalLBL2StatusCRD(ctx)
		ns := newNamespace(nil)
		mlb := metallbNamespace(ctx)
		elsewhere := newNamespace(nil)
		handOverNode(ctx, "node-a", "198.51.100.130")
		handOverNode(ctx, "node-b", "198.51.100.131")
		speakerA, speakerB := speakerPod(ctx, mlb, "node-a"), speakerPod(ctx, mlb, "node-b")
		servedByMetalLB(vip, func() {
			// What MetalLB's speaker on node-a wrote, and what others wrote to steer the
			// address to node-b: each would make the statuses disagree, and none counts.
			createL2Status(ctx, mlb, ns, "web", "node-a", "node-a", speakerA)
			createL2Status(ctx, elsewhere, ns, "web", "node-b", "node-b", nil)
			createL2Status(ctx, mlb, ns, "web", "node-b", "node-a", speakerA)
			createL2Status(ctx, mlb, ns, "web", "node-b", "node-b", speakerA)
			createL2Status(ctx, mlb, ns, "web", "node-b", "node-b", nil)
			createL2Status(ctx, mlb, ns, "other", "node-b", "node-b", speakerB)
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
			g.Expect(ip.Spec.AwaitingDataPath).To(BeTrue())
			g.Expect(ip.Status.AnnouncedBy).To(Equal([]string{"node-a"}))
		}).Should(Succeed())
		Consistently(func() string { return ledger().Spec.AdoptedFromNode }).WithTimeout(2*time.Second).Should(Equal("node-a"),
			"node-a announces the address it was adopted from")

		By("node-b's agent writes itself in node-a's place and reports the address programmed: nothing ends")
		agent, err := client.New(env.AgentConfig("node-b"), client.Options{Scheme: paasv1.NewScheme()})
		Expect(err).NotTo(HaveOccurred())
		Eventually(func() error {
			ip := ledger()
			patch := client.MergeFromWithOptions(ip.DeepCopy(), client.MergeFromWithOptimisticLock{})
			ip.Status.AnnouncedBy = []string{"node-b"}
			ip.Status.ProgrammedBy = append(ip.Status.ProgrammedBy, "node-b")
			return agent.Status().Patch(ctx, ip, patch)
		}).Should(Succeed())
		svc := &corev1.Service{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: ns, Name: "web"}, svc)).To(Succeed())
		Consistently(func(g Gomega) {
			ip := ledger()
			g.Expect(ip.Spec.AdoptedFromNode).To(Equal("node-a"))
			g.Expect(ip.Spec.AwaitingDataPath).To(BeTrue())
			g.Expect(ipModeOf(getService(svc))).To(Equal(corev1.LoadBalancerIPModeVIP))
		}).WithTimeout(3 * time.Second).Should(Succeed())

		By("node-a turns NotReady: the election gives the address to node-b, which announces it")
		setNodeReady(ctx, "node-a", corev1.ConditionFalse)
		Eventually(func() string { return ledger().Spec.AdoptedFromNode }).Should(BeEmpty())
		Eventually(func() corev1.LoadBalancerIPMode { return ipModeOf(getService(svc)) }).Should(Equal(corev1.LoadBalancerIPModeProxy))
	})
})

// metallbNamespace creates MetalLB's namespace (the operator's --metallb-namespace default)
// with the ServiceAccount its pods run as, once per API server.
func metallbNamespace(ctx context.Context) string {
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: service.DefaultMetalLBNamespace}}
	if err := k8s.Create(ctx, ns); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Namespace: ns.Name, Name: "default"}}
	if err := k8s.Create(ctx, sa); !apierrors.IsAlreadyExists(err) {
		Expect(err).NotTo(HaveOccurred())
	}
	return ns.Name
}

// speakerPod creates a MetalLB speaker pod bound to node in ns, and deletes it at the end.
func speakerPod(ctx context.Context, ns, node string) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, GenerateName: "speaker-", Labels: map[string]string{"app": "metallb", "component": "speaker"}},
		Spec: corev1.PodSpec{NodeName: node, AutomountServiceAccountToken: ptr.To(false),
			Containers: []corev1.Container{{Name: "speaker", Image: "quay.io/metallb/speaker:test"}}},
	}
	Expect(k8s.Create(ctx, pod)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), pod))).To(Succeed()) })
	return pod
}

// handOverNode creates a Ready Node with the InternalIP addr whose agent published an
// interface on addr's /26, and deletes it at the end.
func handOverNode(ctx context.Context, name, addr string) *corev1.Node {
	n := reservedNode(name, []string{addr}, nil, `[{"name":"eth0","addrs":["`+addr+`/26"]}]`)
	setNodeReady(ctx, name, corev1.ConditionTrue)
	return n
}

// setNodeReady writes the Ready condition of Node name as its kubelet would.
func setNodeReady(ctx context.Context, name string, status corev1.ConditionStatus) {
	Eventually(func() error {
		n := &corev1.Node{}
		if err := k8s.Get(ctx, client.ObjectKey{Name: name}, n); err != nil {
			return err
		}
		n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: status, Reason: "KubeletReady",
			LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now()}}
		return k8s.Status().Update(ctx, n)
	}).Should(Succeed())
}

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

// createL2Status creates a ServiceL2Status in ns for the Service svcNS/svcName naming node,
// labelled with label as MetalLB's node and owned by speaker (none when nil), once the API
// server serves the CRD.
func createL2Status(ctx context.Context, ns, svcNS, svcName, node, label string, speaker *corev1.Pod) {
	s := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "metallb.io/v1beta1", "kind": "ServiceL2Status",
		"metadata": map[string]any{"generateName": "l2-", "namespace": ns, "labels": map[string]any{
			"metallb.io/node": label, "metallb.io/service-name": svcName, "metallb.io/service-namespace": svcNS}},
	}}
	if speaker != nil {
		s.SetOwnerReferences([]metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: speaker.Name, UID: speaker.UID}})
	}
	Eventually(func() error { return k8s.Create(ctx, s) }).Should(Succeed())
	Expect(unstructured.SetNestedMap(s.Object, map[string]any{"node": node, "serviceName": svcName, "serviceNamespace": svcNS}, "status")).To(Succeed())
	Expect(k8s.Status().Update(ctx, s)).To(Succeed())
}
