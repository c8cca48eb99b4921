//go:build envtest

// Package integration tests the operator against a real kube-apiserver and etcd:
// the operator runs in-process as its own ServiceAccount, so RBAC, CEL and the
// admission policies in config/ are exercised exactly as installed.
package integration

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"testing"
	"time"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/cmd"
	"github.com/paas-org/vip-allocator-operator/controllers/agent"
	ledgerrules "github.com/paas-org/vip-allocator-operator/internal/ledger"
	"github.com/paas-org/vip-allocator-operator/migration"
	"github.com/paas-org/vip-allocator-operator/test/operatortest"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

var (
	env     *testenv.Env
	k8s     client.Client // the admin
	stopOp  func() error  // ends the operator runOperator started; nil when none runs
	tempDir string
	// stopAnnouncer ends standInAnnouncer.
	stopAnnouncer context.CancelFunc
)

func TestIntegration(t *testing.T) {
	RegisterFailHandler(Fail)
	RunSpecs(t, "operator against a real API server")
}

var _ = BeforeSuite(func() {
	ctrl.SetLogger(zap.New(zap.WriteTo(GinkgoWriter), zap.UseDevMode(true)))
	SetDefaultEventuallyTimeout(30 * time.Second)
	SetDefaultEventuallyPollingInterval(100 * time.Millisecond)
	var err error
	env, err = testenv.Start()
	Expect(err).NotTo(HaveOccurred())
	k8s = env.Admin
	tempDir, err = os.MkdirTemp("", "vip-allocator-integration")
	Expect(err).NotTo(HaveOccurred())
	runOperator()
	var announcerCtx context.Context
	announcerCtx, stopAnnouncer = context.WithCancel(context.Background())
	standInAnnouncer(announcerCtx)
})

var _ = AfterSuite(func() {
	if stopAnnouncer != nil {
		stopAnnouncer()
	}
	if stopOp != nil {
		stopOperator()
	}
	if env != nil {
		Expect(env.Stop()).To(Succeed())
	}
	os.RemoveAll(tempDir)
})

// operatorOptions are the flags the suite's operator runs with.
var operatorOptions = cmd.OperatorOptions{MetricsAddr: "0", ProbeAddr: "0", Workers: 8, IPMode: "Proxy",
	Agent:     agent.Options{Namespace: testenv.OperatorNamespace, Image: "registry.example/vip-allocator:test"},
	Migration: migration.Options{CutoverDelay: 2 * time.Second}}

// runOperator runs the operator in-process as the operator's ServiceAccount
// (operatortest.Start) with operatorOptions, until stopOperator.
func runOperator() {
	var err error
	stopOp, err = operatortest.Start(env.OperatorConfig, operatorOptions)
	Expect(err).NotTo(HaveOccurred())
}

// stopOperator ends the operator and fails the spec if it failed.
func stopOperator() {
	Expect(stopOp()).To(Succeed())
	stopOp = nil
}

var nsCounter int

// newNamespace creates a namespace for one test and deletes it afterwards.
func newNamespace(labels map[string]string) string {
	nsCounter++
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("t%d", nsCounter), Labels: labels}}
	Expect(k8s.Create(context.Background(), ns)).To(Succeed())
	DeferCleanup(func() { deleteAllServices(ns.Name) })
	return ns.Name
}

// deleteAllServices deletes a namespace's Services and waits until the operator
// has released their addresses (envtest has no namespace controller to do it).
func deleteAllServices(ns string) {
	ctx := context.Background()
	// A collection delete of a thousand Services can outlast the API server's request
	// timeout on a loaded machine; what it deleted stays deleted, so it is retried.
	Eventually(func() error {
		return k8s.DeleteAllOf(ctx, &corev1.Service{}, client.InNamespace(ns))
	}).WithTimeout(3 * time.Minute).Should(Succeed())
	Eventually(func(g Gomega) {
		var ips paasv1.IPList
		g.Expect(k8s.List(ctx, &ips)).To(Succeed())
		for _, ip := range ips.Items {
			for _, o := range ledgerrules.Holders(&ip) {
				g.Expect(o.Namespace).NotTo(Equal(ns), "ledger %s still held", ip.Name)
			}
		}
	}).Should(Succeed())
}

func newIPGroup(name, segment string, excluded ...string) *paasv1.IPGroup {
	return &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: paasv1.IPGroupSpec{Segment: segment, ExcludedIPs: excluded}}
}

// createIPGroup creates g and deletes it when the test ends.
func createIPGroup(g *paasv1.IPGroup) *paasv1.IPGroup {
	Expect(k8s.Create(context.Background(), g)).To(Succeed())
	DeferCleanup(func() { Expect(client.IgnoreNotFound(k8s.Delete(context.Background(), g))).To(Succeed()) })
	return g
}

// svcOption changes the Service testenv.LoadBalancerService builds.
type svcOption = func(*corev1.Service)

func withAnnotation(k, v string) svcOption {
	return func(s *corev1.Service) {
		if s.Annotations == nil {
			s.Annotations = map[string]string{}
		}
		s.Annotations[k] = v
	}
}

func withLoadBalancerIP(ip string) svcOption {
	return func(s *corev1.Service) { s.Spec.LoadBalancerIP = ip }
}

func withClass(class string) svcOption {
	return func(s *corev1.Service) { s.Spec.LoadBalancerClass = &class }
}

func withLabels(l map[string]string) svcOption { return func(s *corev1.Service) { s.Labels = l } }

func withFamilies(policy corev1.IPFamilyPolicy, families ...corev1.IPFamily) svcOption {
	return func(s *corev1.Service) { s.Spec.IPFamilyPolicy, s.Spec.IPFamilies = &policy, families }
}

func createService(s *corev1.Service) *corev1.Service {
	Expect(k8s.Create(context.Background(), s)).To(Succeed())
	return s
}

func getService(s *corev1.Service) *corev1.Service {
	out := &corev1.Service{}
	ExpectWithOffset(1, k8s.Get(context.Background(), client.ObjectKeyFromObject(s), out)).To(Succeed())
	return out
}

// ingressIPs is the Service's status.loadBalancer.ingress addresses.
func ingressIPs(s *corev1.Service) []string {
	var out []string
	for _, in := range s.Status.LoadBalancer.Ingress {
		out = append(out, in.IP)
	}
	return out
}

// eventuallyIPs waits until the Service holds exactly want and returns it.
func eventuallyIPs(s *corev1.Service, want ...string) *corev1.Service {
	var got *corev1.Service
	EventuallyWithOffset(1, func(g Gomega) {
		got = &corev1.Service{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(s), got)).To(Succeed())
		g.Expect(ingressIPs(got)).To(Equal(want))
	}).Should(Succeed())
	return got
}

// eventuallyHasIPs waits until the Service holds n addresses and returns them.
func eventuallyHasIPs(s *corev1.Service, n int) []string {
	var ips []string
	EventuallyWithOffset(1, func(g Gomega) {
		got := &corev1.Service{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(s), got)).To(Succeed())
		ips = ingressIPs(got)
		g.Expect(ips).To(HaveLen(n))
	}).Should(Succeed())
	return ips
}

// eventuallyCondition waits until the IPAllocated condition has status and reason.
func eventuallyCondition(s *corev1.Service, status metav1.ConditionStatus, reason string) metav1.Condition {
	var c metav1.Condition
	EventuallyWithOffset(1, func(g Gomega) {
		got := &corev1.Service{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKeyFromObject(s), got)).To(Succeed())
		found := meta.FindStatusCondition(got.Status.Conditions, paasv1.ConditionIPAllocated)
		g.Expect(found).NotTo(BeNil())
		g.Expect(found.Status).To(Equal(status), found.Message)
		g.Expect(found.Reason).To(Equal(reason), found.Message)
		c = *found
	}).Should(Succeed())
	return c
}

// eventuallyEvent waits for an Event of reason on the object whose message contains text.
func eventuallyEvent(obj client.Object, eventType, reason, text string) {
	EventuallyWithOffset(1, func(g Gomega) {
		var events corev1.EventList
		g.Expect(k8s.List(context.Background(), &events, client.InNamespace(obj.GetNamespace()))).To(Succeed())
		var seen []string
		for _, e := range events.Items {
			if e.InvolvedObject.Name == obj.GetName() && e.Reason == reason && e.Type == eventType {
				seen = append(seen, e.Message)
			}
		}
		g.Expect(seen).To(ContainElement(ContainSubstring(text)))
	}).Should(Succeed())
}

// ledger returns the IP objects by name.
func ledger() map[string]paasv1.IP {
	var list paasv1.IPList
	ExpectWithOffset(1, k8s.List(context.Background(), &list)).To(Succeed())
	out := map[string]paasv1.IP{}
	for _, ip := range list.Items {
		out[ip.Name] = ip
	}
	return out
}

func addr(s string) netip.Addr { return netip.MustParseAddr(s) }
