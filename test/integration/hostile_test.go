//go:build envtest

package integration

import (
	"fmt"
	"strings"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// Hostile vip.paas.org/ips annotations on the real API server and the running
// operator: each is answered with a condition a person can act on,
// and the operator keeps serving the others.
var _ = Describe("hostile vip.paas.org/ips annotations", func() {
	five00 := make([]string, 500)
	for i := range five00 {
		five00[i] = fmt.Sprintf("10.232.%d.%d", i/250, i%250+1)
	}
	for _, tc := range []struct {
		desc, value string
		reason      string
		inMessage   string
		holds       string
	}{
		{desc: "spaces and empty entries around the address", value: "  10.232.9.5 , ,", reason: paasv1.ReasonAllocated, holds: "10.232.9.5"},
		{desc: "spaces inside an entry", value: "10.232.9.6 10.232.9.7", reason: paasv1.ReasonInvalidRequest, inMessage: `"10.232.9.6 10.232.9.7" is not an IP address`},
		{desc: "duplicates", value: "10.232.9.8,10.232.9.8", reason: paasv1.ReasonInvalidRequest, inMessage: "names 10.232.9.8 twice"},
		{desc: "500 entries", value: strings.Join(five00, ","), reason: paasv1.ReasonInvalidRequest, inMessage: "lists 500 addresses"},
		{desc: "a zone", value: "fe80::1%eth0", reason: paasv1.ReasonInvalidRequest, inMessage: "has a zone (%eth0)"},
		{desc: "leading zeros", value: "10.232.9.010", reason: paasv1.ReasonInvalidRequest, inMessage: "leading zeros are ambiguous"},
		{desc: "IPv4-mapped IPv6", value: "::ffff:10.232.9.11", reason: paasv1.ReasonInvalidRequest, inMessage: "write it as 10.232.9.11"},
	} {
		It("answers "+tc.desc, func() {
			createIPGroup(newIPGroup(fmt.Sprintf("hostile-%d", nsCounter+1), "10.232.9.0/24", "10.232.9.0"))
			ns := newNamespace(nil)
			svc := createService(testenv.LoadBalancerService(ns, "web", withAnnotation(paasv1.IPsAnnotation, tc.value)))
			status := metav1.ConditionFalse
			if tc.reason == paasv1.ReasonAllocated {
				status = metav1.ConditionTrue
			}
			c := eventuallyCondition(svc, status, tc.reason)
			Expect(c.Message).To(ContainSubstring(tc.inMessage))
			if tc.holds != "" {
				eventuallyIPs(svc, tc.holds)
			} else {
				Expect(getService(svc).Status.LoadBalancer.Ingress).To(BeEmpty())
				eventuallyEvent(svc, corev1.EventTypeWarning, "AllocationFailed", tc.inMessage)
			}
		})
	}
})
