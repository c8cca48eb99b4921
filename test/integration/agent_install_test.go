//go:build envtest

package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

var _ = Describe("the agent DaemonSet's place in the installation", Ordered, func() {
	ctx := context.Background()
	dsKey := client.ObjectKey{Namespace: testenv.OperatorNamespace, Name: agent.Name}

	It("is owned by the agent's ServiceAccount, so deleting the bundle deletes it", func() {
		sa := &corev1.ServiceAccount{}
		Expect(k8s.Get(ctx, client.ObjectKey{Namespace: testenv.OperatorNamespace, Name: agent.ServiceAccount}, sa)).To(Succeed())
		Eventually(func(g Gomega) {
			ds := &appsv1.DaemonSet{}
			g.Expect(k8s.Get(ctx, dsKey, ds)).To(Succeed())
			g.Expect(ds.OwnerReferences).To(HaveLen(1))
			owner := ds.OwnerReferences[0]
			g.Expect([]string{owner.APIVersion, owner.Kind, owner.Name, string(owner.UID)}).
				To(Equal([]string{"v1", "ServiceAccount", sa.Name, string(sa.UID)}))
		}).Should(Succeed())
	})

	It("runs the agent as root with NET_ADMIN and NET_RAW only, so no UID is fixed for the operator", func() {
		ds := &appsv1.DaemonSet{}
		Expect(k8s.Get(ctx, dsKey, ds)).To(Succeed())
		sc := ds.Spec.Template.Spec.Containers[0].SecurityContext
		Expect(*sc.RunAsUser).To(BeZero())
		Expect(*sc.AllowPrivilegeEscalation).To(BeFalse())
		Expect(sc.SeccompProfile.Type).To(Equal(corev1.SeccompProfileTypeRuntimeDefault))
	})

	It("labels its namespace privileged for Pod Security Admission, the only level that admits the agent", func() {
		Eventually(func(g Gomega) {
			ns := &corev1.Namespace{}
			g.Expect(k8s.Get(ctx, client.ObjectKey{Name: testenv.OperatorNamespace}, ns)).To(Succeed())
			g.Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "privileged"))
		}).Should(Succeed())
	})

	It("says how to fix it when the namespace label is someone else's", func() {
		ns := &corev1.Namespace{}
		Expect(k8s.Get(ctx, client.ObjectKey{Name: testenv.OperatorNamespace}, ns)).To(Succeed())
		ns.Labels["pod-security.kubernetes.io/enforce"] = "baseline"
		Expect(k8s.Update(ctx, ns, client.FieldOwner("cluster-admin"))).To(Succeed())
		DeferCleanup(func() {
			Expect(k8s.Get(ctx, client.ObjectKey{Name: testenv.OperatorNamespace}, ns)).To(Succeed())
			ns.Labels["pod-security.kubernetes.io/enforce"] = "privileged"
			Expect(k8s.Update(ctx, ns)).To(Succeed())
		})
		// Any change to the DaemonSet makes the operator reconcile it.
		ds := &appsv1.DaemonSet{}
		Expect(k8s.Get(ctx, dsKey, ds)).To(Succeed())
		ds.Annotations = map[string]string{"touched": "yes"}
		Expect(k8s.Update(ctx, ds)).To(Succeed())
		Eventually(func(g Gomega) {
			var events corev1.EventList
			g.Expect(k8s.List(ctx, &events, client.InNamespace(testenv.OperatorNamespace))).To(Succeed())
			var found []string
			for _, e := range events.Items {
				if e.Reason == agent.EventNamespaceNotPrivileged && e.InvolvedObject.Name == agent.Name {
					found = append(found, e.Message)
				}
			}
			g.Expect(found).To(ContainElement(ContainSubstring("kubectl label namespace vip-allocator-operator pod-security.kubernetes.io/enforce=privileged --overwrite")))
		}).Should(Succeed())
		Expect(k8s.Get(ctx, client.ObjectKey{Name: testenv.OperatorNamespace}, ns)).To(Succeed())
		Expect(ns.Labels).To(HaveKeyWithValue("pod-security.kubernetes.io/enforce", "baseline"), "the operator must not override an admin's choice")
	})
})
