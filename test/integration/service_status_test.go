//go:build envtest

package integration

import (
	"context"
	"fmt"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// The admission policy vip-allocator-service-status-writers on the real API
// server: only the operator writes the addresses of the Services it serves;
// the agents write their own condition and nothing else, on Services of every
// class; admins are refused too; other classes are otherwise untouched.
var _ = Describe("who may write a Service's status.loadBalancer.ingress", Ordered, func() {
	ctx := context.Background()
	var agent client.Client
	BeforeAll(func() {
		user, err := env.AddUser(envtest.User{Name: "system:serviceaccount:vip-allocator-operator:vip-allocator-agent",
			Groups: []string{"system:serviceaccounts"}}, env.AdminConfig)
		Expect(err).NotTo(HaveOccurred())
		agent, err = client.New(user.Config(), client.Options{Scheme: paasv1.NewScheme()})
		Expect(err).NotTo(HaveOccurred())
	})

	patchStatus := func(c client.Client, svc *corev1.Service, patch string, opts ...client.SubResourcePatchOption) error {
		return c.Status().Patch(ctx, svc.DeepCopy(), client.RawPatch(types.StrategicMergePatchType, []byte(patch)), opts...)
	}
	forged := func(ip string) string {
		return fmt.Sprintf(`{"status":{"loadBalancer":{"ingress":[{"ip":%q,"ipMode":"Proxy"}]}}}`, ip)
	}
	refused := func(err error, by string) {
		GinkgoHelper()
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want the policy's refusal, got %v", err)
		Expect(err.Error()).To(ContainSubstring("written by the vip-allocator operator only (not " + by))
	}

	for _, tc := range []struct {
		desc  string
		class string
	}{{"no class", ""}, {"our class", paasv1.LoadBalancerClass}} {
		It("refuses an admin's address in the status of a Service with "+tc.desc, func() {
			ns := newNamespace(nil)
			var opts []svcOption
			if tc.class != "" {
				opts = append(opts, withClass(tc.class))
			}
			svc := createService(testenv.LoadBalancerService(ns, "web", opts...))
			// A dry run until the policy is in force: a write that got through
			// before would make every later identical one a no-op, allowed.
			Eventually(func() error { return patchStatus(k8s, svc, forged("192.0.2.251"), client.DryRunAll) }).Should(MatchError(ContainSubstring("vip-allocator operator only")))
			refused(patchStatus(k8s, svc, forged("192.0.2.251")), "admin")
			Expect(ingressIPs(getService(svc))).To(BeEmpty())
		})
	}

	It("refuses the agents an address, and any condition but their own", func() {
		ns := newNamespace(nil)
		svc := createService(testenv.LoadBalancerService(ns, "web"))
		refused(patchStatus(agent, svc, forged("192.0.2.252")), "system:serviceaccount:vip-allocator-operator:vip-allocator-agent")
		err := patchStatus(agent, svc, `{"status":{"conditions":[{"type":"vip.paas.org/Announced","status":"False","reason":"NoAnnouncer","message":"forged","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "%v", err)
		Expect(err.Error()).To(ContainSubstring("write only the condition vip.paas.org/Programmed"))
		Expect(patchStatus(agent, svc, `{"status":{"conditions":[{"type":"vip.paas.org/Programmed","status":"False","reason":"NotInLedger","message":"m","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}`)).To(Succeed())
		Expect(patchStatus(agent, svc, `{"status":{"conditions":[{"$patch":"delete","type":"vip.paas.org/Programmed"}]}}`)).To(Succeed())

		// Another implementation's Service: kube-proxy would intercept an address planted there on every node.
		other := createService(testenv.LoadBalancerService(ns, "other", withClass("example.com/lb")))
		refused(patchStatus(agent, other, forged("192.0.2.252")), "system:serviceaccount:vip-allocator-operator:vip-allocator-agent")
		Expect(ingressIPs(getService(other))).To(BeEmpty())
	})

	It("lets the operator write the addresses, and leaves other classes alone", func() {
		ns := newNamespace(nil)
		// Another implementation's Service: its controller (here an admin) writes what it likes.
		other := createService(testenv.LoadBalancerService(ns, "other", withClass("example.com/lb")))
		Expect(patchStatus(k8s, other, forged("192.0.2.253"))).To(Succeed())
		Expect(ingressIPs(getService(other))).To(Equal([]string{"192.0.2.253"}))

		// The operator's identity may (the running operator then takes back
		// what the ledger does not give the Service: that is its business).
		svc := createService(testenv.LoadBalancerService(ns, "web"))
		Expect(patchStatus(env.Operator, svc, forged("192.0.2.254"))).To(Succeed())
	})
})
