//go:build envtest

package integration

import (
	"context"

	. "github.com/onsi/gomega"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// releaseAddresses sets vip.paas.org/release-addresses=true on the IPGroup
// called name: the admin lets go the addresses it no longer allows.
func releaseAddresses(name string) {
	editIPGroup(name, func(g *paasv1.IPGroup) {
		if g.Annotations == nil {
			g.Annotations = map[string]string{}
		}
		g.Annotations[paasv1.ReleaseAddressesAnnotation] = "true"
	})
}

// eventuallyKept waits until the IPGroup's AddressesKept condition has reason
// and returns it.
func eventuallyKept(name, reason string) metav1.Condition {
	var c metav1.Condition
	EventuallyWithOffset(1, func(g Gomega) {
		var group paasv1.IPGroup
		g.Expect(k8s.Get(context.Background(), types.NamespacedName{Name: name}, &group)).To(Succeed())
		got := meta.FindStatusCondition(group.Status.Conditions, paasv1.IPGroupAddressesKept)
		g.Expect(got).NotTo(BeNil())
		g.Expect(got.Reason).To(Equal(reason), got.Message)
		c = *got
	}).Should(Succeed())
	return c
}

// eventuallyGone waits until the IPGroup called name no longer exists.
func eventuallyGone(name string) {
	EventuallyWithOffset(1, func() bool {
		err := k8s.Get(context.Background(), types.NamespacedName{Name: name}, &paasv1.IPGroup{})
		return apierrors.IsNotFound(err)
	}).Should(BeTrue(), "IPGroup %s is still there", name)
}
