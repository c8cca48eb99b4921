//go:build envtest

package integration

import (
	"context"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	authnv1 "k8s.io/api/authentication/v1"
	authzv1 "k8s.io/api/authorization/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/explain"
	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// config/rbac/explain_role.yaml and config/admission/explain_token.yaml on the
// real API server: the explain token (a TokenRequest, the one write explain
// makes) goes only to whom the Role vip-allocator-explainer is bound, for the
// explain ServiceAccount alone, with the audience and lifetime the operator
// sets; that token may get the agents' debug path and nothing else, and the
// explainer reaches the agents through their Service's one port, never a pod's
// (pods/proxy on a host-network pod is every port of its node).
var _ = Describe("the explain token", func() {
	ctx := context.Background()
	ns := testenv.OperatorNamespace
	person := func(name string) kubernetes.Interface {
		GinkgoHelper()
		u, err := env.AddUser(envtest.User{Name: name, Groups: []string{"system:authenticated"}}, env.AdminConfig)
		Expect(err).NotTo(HaveOccurred())
		return kubernetes.NewForConfigOrDie(u.Config())
	}
	token := func(k kubernetes.Interface, sa string) (string, error) {
		tr, err := k.CoreV1().ServiceAccounts(ns).CreateToken(ctx, sa, explain.TokenRequest(), metav1.CreateOptions{})
		if err != nil {
			return "", err
		}
		return tr.Status.Token, nil
	}
	forbidden := func(err error) {
		GinkgoHelper()
		Expect(apierrors.IsForbidden(err)).To(BeTrue(), "want Forbidden, got %v", err)
	}

	It("goes to the explainer alone, and reads /debug/vips only", func() {
		admin := kubernetes.NewForConfigOrDie(env.AdminConfig)
		_, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "oncall-explains"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "vip-allocator-explainer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "oncall"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		oncall, stranger := person("oncall"), person("stranger")

		var tok string
		Eventually(func() (err error) { tok, err = token(oncall, agentfacts.ExplainServiceAccount); return err }).Should(Succeed())
		_, err = token(oncall, "vip-allocator-agent")
		forbidden(err) // the agents' identity is not the explainer's to take
		_, err = token(stranger, agentfacts.ExplainServiceAccount)
		forbidden(err)
		_, err = oncall.CoreV1().Pods("default").List(ctx, metav1.ListOptions{})
		forbidden(err) // no pods at all

		// As the agents review it on /debug/vips: for the explain audience.
		review, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: tok,
			Audiences: []string{agentfacts.ExplainAudience}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(review.Status.Authenticated).To(BeTrue())
		may := func(attrs authzv1.SubjectAccessReviewSpec) bool {
			GinkgoHelper()
			attrs.User, attrs.Groups = review.Status.User.Username, review.Status.User.Groups
			sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: attrs}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return sar.Status.Allowed
		}
		Expect(may(authzv1.SubjectAccessReviewSpec{NonResourceAttributes: &authzv1.NonResourceAttributes{Path: agentfacts.Path, Verb: "get"}})).To(BeTrue())
		Expect(may(authzv1.SubjectAccessReviewSpec{NonResourceAttributes: &authzv1.NonResourceAttributes{Path: "/metrics", Verb: "get"}})).To(BeFalse())
		Expect(may(authzv1.SubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "secrets"}})).To(BeFalse())
		Expect(may(authzv1.SubjectAccessReviewSpec{ResourceAttributes: &authzv1.ResourceAttributes{Namespace: ns, Verb: "get", Resource: "pods", Subresource: "proxy"}})).To(BeFalse())

		By("the token is for the agents alone: the API server does not take it")
		Expect(review.Status.Audiences).To(Equal([]string{agentfacts.ExplainAudience}))
		apiReview, err := admin.AuthenticationV1().TokenReviews().Create(ctx, &authnv1.TokenReview{Spec: authnv1.TokenReviewSpec{Token: tok}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		Expect(apiReview.Status.Authenticated).To(BeFalse(), "an explain token must be worth nothing to the API server")
		_, err = kubernetes.NewForConfigOrDie(&rest.Config{Host: env.AdminConfig.Host, BearerToken: tok,
			TLSClientConfig: rest.TLSClientConfig{CAData: env.AdminConfig.CAData}}).CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		Expect(apierrors.IsUnauthorized(err)).To(BeTrue(), "want Unauthorized, got %v", err)

		By("its lifetime and audience are the operator's, not the caller's")
		for _, spec := range []authnv1.TokenRequestSpec{
			{ExpirationSeconds: ptr.To[int64](600)},
			{Audiences: []string{agentfacts.ExplainAudience}, ExpirationSeconds: ptr.To[int64](86400)},
			{Audiences: []string{agentfacts.ExplainAudience, "https://kubernetes.default.svc"}, ExpirationSeconds: ptr.To[int64](600)},
		} {
			// Eventually: the suite may begin here, as the API server loads the
			// policies it was just given.
			Eventually(func() error {
				_, err := oncall.CoreV1().ServiceAccounts(ns).CreateToken(ctx, agentfacts.ExplainServiceAccount,
					&authnv1.TokenRequest{Spec: spec}, metav1.CreateOptions{})
				return err
			}).Should(MatchError(ContainSubstring("a token of vip-allocator-explain")), "TokenRequest %+v", spec)
		}
	})

	It("reaches the agents through their Service's one port, and no pod", func() {
		admin := kubernetes.NewForConfigOrDie(env.AdminConfig)
		_, err := admin.RbacV1().RoleBindings(ns).Create(ctx, &rbacv1.RoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "viewer-explains"},
			RoleRef:  rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "Role", Name: "vip-allocator-explainer"},
			Subjects: []rbacv1.Subject{{Kind: rbacv1.UserKind, APIGroup: rbacv1.GroupName, Name: "viewer"}}}, metav1.CreateOptions{})
		Expect(err).NotTo(HaveOccurred())
		viewer := person("viewer")
		may := func(attrs authzv1.ResourceAttributes) bool {
			GinkgoHelper()
			attrs.Namespace = ns
			sar, err := admin.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authzv1.SubjectAccessReview{Spec: authzv1.SubjectAccessReviewSpec{
				User: "viewer", Groups: []string{"system:authenticated"}, ResourceAttributes: &attrs}}, metav1.CreateOptions{})
			Expect(err).NotTo(HaveOccurred())
			return sar.Status.Allowed
		}
		Eventually(func() bool {
			return may(authzv1.ResourceAttributes{Verb: "get", Resource: "services", Subresource: "proxy", Name: explain.ServiceProxyName(paasv1.AgentMetricsPort)})
		}).Should(BeTrue())
		Expect(may(authzv1.ResourceAttributes{Verb: "get", Resource: "pods", Subresource: "proxy", Name: "vip-allocator-agent-x"})).To(BeFalse(), "pods/proxy reaches every port of a host-network pod's node")
		Expect(may(authzv1.ResourceAttributes{Verb: "get", Resource: "pods", Subresource: "proxy"})).To(BeFalse())
		Expect(may(authzv1.ResourceAttributes{Verb: "get", Resource: "services", Subresource: "proxy", Name: "https:vip-allocator-agent-facts:10250"})).To(BeFalse(), "another port of the Service")
		Expect(may(authzv1.ResourceAttributes{Verb: "get", Resource: "services", Subresource: "proxy", Name: "kube-dns"})).To(BeFalse())

		By("the real request: pods/proxy is refused")
		err = viewer.CoreV1().RESTClient().Get().Namespace(ns).Resource("pods").Name("https:vip-allocator-agent-x:10250").
			SubResource("proxy").Suffix("/pods").Do(ctx).Error()
		forbidden(err)
		By("services/proxy on the agents' Service is let through (to no endpoint here)")
		err = viewer.CoreV1().RESTClient().Get().Namespace(ns).Resource("services").Name(explain.ServiceProxyName(paasv1.AgentMetricsPort)).
			SubResource("proxy").Suffix(agentfacts.Path).Do(ctx).Error()
		Expect(apierrors.IsForbidden(err)).To(BeFalse(), "want past authorization, got %v", err)
	})
})
