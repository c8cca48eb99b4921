//go:build envtest

package integration

import (
	"context"
	"fmt"
	"net/netip"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// legacyVIP describes one VirtualIP as the original operator left it.
type legacyVIP struct {
	ns, name, service, ip, gsm string
	state                      string // status.state; Valid when empty
	specIP                     bool   // spec.ip set to ip
	noService                  bool   // the target Service does not exist
	migrate                    bool   // created with the migrate annotation already
}

// createGSM creates a GroupSegmentMapping and deletes it, and the IPGroup the
// migration may make from it, when the test ends.
func createGSM(name, segment string, excluded ...string) {
	ctx := context.Background()
	gsm := &paasv1.GroupSegmentMapping{ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: paasv1.GroupSegmentMappingSpec{Segment: segment, ExcludedIPs: excluded, KeepalivedGroup: "keepalived/" + name}}
	Expect(k8s.Create(ctx, gsm)).To(Succeed())
	DeferCleanup(func() {
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, gsm))).To(Succeed())
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: name}}))).To(Succeed())
	})
}

// allowVirtualIPCreation lifts the deny-create admission policy while f builds
// fixtures, and restores it even when f fails.
func allowVirtualIPCreation(f func()) {
	restore, err := testenv.AllowVirtualIPCreation(context.Background(), k8s)
	Expect(err).NotTo(HaveOccurred())
	defer func() { Expect(restore()).To(Succeed()) }()
	f()
}

// createLegacy builds the legacy state of one VirtualIP exactly as the
// original left it (testenv.CreateLegacy). Call inside allowVirtualIPCreation.
func createLegacy(l legacyVIP) *paasv1.VirtualIP {
	vip, err := testenv.CreateLegacy(context.Background(), k8s, env.Operator, testenv.LegacyVIP{Namespace: l.ns, Name: l.name,
		Service: l.service, IP: l.ip, GSM: l.gsm, State: l.state, SpecIP: l.specIP, NoService: l.noService, Migrate: l.migrate})
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	DeferCleanup(func() { deleteLegacy(l) })
	return vip
}

// deleteLegacy removes what a test left of a legacy VirtualIP (envtest has no
// garbage collector): the VirtualIP (finalizers dropped), its clone, and the
// ledger object if the migration did not hand it to a Service.
func deleteLegacy(l legacyVIP) {
	ctx := context.Background()
	vip := &paasv1.VirtualIP{}
	if err := k8s.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: l.name}, vip); err == nil {
		vip.Finalizers = nil
		Expect(client.IgnoreNotFound(k8s.Update(ctx, vip))).To(Succeed())
		Expect(client.IgnoreNotFound(k8s.Delete(ctx, vip))).To(Succeed())
	}
	Expect(client.IgnoreNotFound(k8s.Delete(ctx, &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: l.ns, Name: l.name + paasv1.CloneServiceSuffix}}))).To(Succeed())
	ip := &paasv1.IP{}
	if err := k8s.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(netip.MustParseAddr(l.ip))}, ip); err == nil && ip.Spec.Owner == nil {
		Expect(client.IgnoreNotFound(env.Operator.Delete(ctx, ip))).To(Succeed())
	}
}

// createLegacyMany builds n legacy VirtualIPs vip-i -> Service svc-i with the
// addresses ips[i], 16 at a time.
func createLegacyMany(ns, gsm string, ips []string) {
	inParallel(len(ips), func(i int) {
		createLegacy(legacyVIP{ns: ns, name: fmt.Sprintf("vip-%d", i), service: fmt.Sprintf("svc-%d", i), ip: ips[i], gsm: gsm})
	})
}

// inParallel runs f(0..n-1), 16 at a time, and waits for all.
func inParallel(n int, f func(i int)) {
	var wg sync.WaitGroup
	sem := make(chan struct{}, 16)
	for i := range n {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer GinkgoRecover()
			defer wg.Done()
			defer func() { <-sem }()
			f(i)
		}()
	}
	wg.Wait()
}

func getVIP(ns, name string) *paasv1.VirtualIP {
	vip := &paasv1.VirtualIP{}
	ExpectWithOffset(1, k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, vip)).To(Succeed())
	return vip
}

// patchVIP merge-patches a VirtualIP (no resourceVersion: admission decides, not a conflict).
func patchVIP(ns, name, patch string) error {
	vip := &paasv1.VirtualIP{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return k8s.Patch(context.Background(), vip, client.RawPatch("application/merge-patch+json", []byte(patch)))
}

// annotateMigrate sets virtualips.paas.org/migrate on a VirtualIP, as
// "kubectl annotate vip NAME virtualips.paas.org/migrate=”" does.
func annotateMigrate(ns, name string) error {
	vip := &paasv1.VirtualIP{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}}
	return k8s.Patch(context.Background(), vip, client.RawPatch("application/merge-patch+json",
		[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, paasv1.MigrateAnnotation))))
}

// eventuallyState waits until the VirtualIP's status.state is state and returns it.
func eventuallyState(ns, name, state string, timeout ...any) *paasv1.VirtualIP {
	var vip *paasv1.VirtualIP
	EventuallyWithOffset(1, func(g Gomega) {
		vip = &paasv1.VirtualIP{}
		g.Expect(k8s.Get(context.Background(), client.ObjectKey{Namespace: ns, Name: name}, vip)).To(Succeed())
		g.Expect(vip.Status.State).To(Equal(state), vip.Status.Message)
	}, timeout...).Should(Succeed())
	return vip
}

// expectMigrated checks the end state of a migrated VirtualIP: the Service is a
// LoadBalancer holding the IP, the ledger is the Service's, the clone and the
// legacy finalizers are gone.
func expectMigrated(g Gomega, l legacyVIP, group string) {
	ctx := context.Background()
	vip := &paasv1.VirtualIP{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: l.name}, vip)).To(Succeed())
	g.Expect(vip.Status.State).To(Equal(paasv1.VirtualIPMigrated), vip.Status.Message)
	g.Expect(vip.Status.Message).To(ContainSubstring("holding " + l.ip))
	g.Expect(vip.Finalizers).To(BeEmpty())
	svc := &corev1.Service{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: l.service}, svc)).To(Succeed())
	g.Expect(svc.Spec.Type).To(Equal(corev1.ServiceTypeLoadBalancer))
	g.Expect(ingressIPs(svc)).To(Equal([]string{l.ip}))
	if l.specIP {
		g.Expect(svc.Spec.LoadBalancerIP).To(Equal(l.ip), "spec.ip was set: spec.loadBalancerIP stays")
	} else {
		g.Expect(svc.Spec.LoadBalancerIP).To(BeEmpty())
	}
	ip := &paasv1.IP{}
	g.Expect(k8s.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(netip.MustParseAddr(l.ip))}, ip)).To(Succeed())
	g.Expect(ip.Labels).To(Equal(map[string]string{paasv1.IPGroupLabel: group}))
	g.Expect(ip.Annotations).To(HaveKeyWithValue(paasv1.OwnerAnnotation, l.ns+"/"+l.service))
	g.Expect(ip.Spec.Owner).To(Equal(&paasv1.IPOwner{Namespace: l.ns, Name: l.service, UID: svc.UID}))
	g.Expect(ip.Spec.IPGroup).To(Equal(group))
	err := k8s.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: l.name + paasv1.CloneServiceSuffix}, &corev1.Service{})
	g.Expect(apierrors.IsNotFound(err)).To(BeTrue(), "the clone must be gone: %v", err)
}
