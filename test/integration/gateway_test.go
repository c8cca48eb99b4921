//go:build envtest

package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

var _ = Describe("IPGroup announce.gateway", func() {
	group := func(gw *paasv1.Gateway) *paasv1.IPGroup {
		return &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "gateway"},
			Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24", Announce: &paasv1.Announce{Gateway: gw}}}
	}
	DescribeTable("the API server refuses a gateway that is not a router address of its family",
		func(gw paasv1.Gateway, message string) {
			g := group(&gw)
			err := k8s.Create(context.Background(), g)
			if err == nil {
				_ = k8s.Delete(context.Background(), g)
			}
			Expect(err).To(HaveOccurred(), "%+v was accepted", gw)
			Expect(err.Error()).To(ContainSubstring(message))
		},
		Entry("no address", paasv1.Gateway{}, "should have at least 1 properties"),
		Entry("garbage", paasv1.Gateway{IPv4: "router"}, "gateway.ipv4 must be an IPv4 address"),
		Entry("IPv6 as ipv4", paasv1.Gateway{IPv4: "2001:db8::1"}, "gateway.ipv4 must be an IPv4 address"),
		Entry("IPv4 as ipv6", paasv1.Gateway{IPv6: "192.0.2.1"}, "gateway.ipv6 must be an IPv6 address"),
		Entry("unspecified", paasv1.Gateway{IPv4: "0.0.0.0"}, "gateway.ipv4 must be an IPv4 address"),
		Entry("loopback", paasv1.Gateway{IPv6: "::1"}, "gateway.ipv6 must be an IPv6 address"),
	)

	It("accepts a router of each family, IPv6 link-local too", func() {
		g := group(&paasv1.Gateway{IPv4: "192.0.2.1", IPv6: "fe80::1"})
		Expect(k8s.Create(context.Background(), g)).To(Succeed())
		Expect(k8s.Delete(context.Background(), g)).To(Succeed())
	})
})
