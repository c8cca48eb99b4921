package main

import (
	"context"
	"fmt"
	"net/netip"
	"os/exec"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
	"github.com/paas-org/vip-allocator-operator/internal/procmem"
)

// The sharing case: T sharing triples (3T Services, the members of triple i
// carrying sharing key key-i, on TCP 53, UDP 53 and TCP 80), pending when the
// operator starts; time until all hold an address, against the same writes a
// plain client makes for them in the same run (per triple: the ledger object
// created by the first member, joined by the other two with an update each,
// and the three status patches); then 0 addresses held by two keys, and 0
// changed across a SIGKILL restart.
const (
	shareNS         = "share"
	shareBaselineNS = "share-baseline"
)

// sharingResult is what the sharing case measured.
type sharingResult struct {
	services                int
	baseline, allocation    time.Duration
	restart                 time.Duration
	changed, twoKeys, split int
	opCPU                   float64
}

func sharedService(ns string, i int, class *string) *corev1.Service {
	ports := []corev1.ServicePort{
		{Name: "dns-tcp", Protocol: corev1.ProtocolTCP, Port: 53, TargetPort: intstr.FromInt32(53)},
		{Name: "dns-udp", Protocol: corev1.ProtocolUDP, Port: 53, TargetPort: intstr.FromInt32(53)},
		{Name: "http", Protocol: corev1.ProtocolTCP, Port: 80, TargetPort: intstr.FromInt32(8080)},
	}
	svc := service(ns, i, class)
	svc.Annotations = map[string]string{paasv1.SharingKeyAnnotation: fmt.Sprintf("key-%d", i/3)}
	svc.Spec.Ports = ports[i%3 : i%3+1]
	return svc
}

// runSharing measures the sharing case; the operator is stopped when it is
// called, and stopped again when it returns.
func runSharing(ctx context.Context, root, dir string, opArgs []string, admin, operator client.Client, cs *kubernetes.Clientset, triples, workers int) (sharingResult, error) {
	r := sharingResult{services: 3 * triples}
	n := r.services
	for _, ns := range []string{shareNS, shareBaselineNS} {
		if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
			return r, err
		}
	}
	if err := fanout.Run(16, n, func(i int) error {
		return createRetrying(ctx, admin, sharedService(shareBaselineNS, i, ptr.To("bench.example/baseline")))
	}); err != nil {
		return r, err
	}
	if err := fanout.Run(16, n, func(i int) error { return createRetrying(ctx, admin, sharedService(shareNS, i, nil)) }); err != nil {
		return r, err
	}
	baseWatch, err := watchIPs(ctx, cs, shareBaselineNS, n)
	if err != nil {
		return r, err
	}
	watch, err := watchIPs(ctx, cs, shareNS, n)
	if err != nil {
		return r, err
	}

	// Baseline: the writes the operator makes per triple, triples in parallel.
	var pending corev1.ServiceList
	if err := operator.List(ctx, &pending, client.InNamespace(shareBaselineNS)); err != nil {
		return r, err
	}
	byName := map[string]*corev1.Service{}
	for i := range pending.Items {
		byName[pending.Items[i].Name] = &pending.Items[i]
	}
	start := time.Now()
	if err := fanout.Run(workers, triples, func(t int) error {
		return baselineTriple(ctx, operator, byName, t)
	}); err != nil {
		return r, fmt.Errorf("sharing baseline: %w", err)
	}
	<-baseWatch.allServed
	r.baseline = time.Since(start)
	// Gone before the operator starts, as in the first baseline.
	var ledger paasv1.IPList
	if err := operator.List(ctx, &ledger); err != nil {
		return r, err
	}
	var theirs []paasv1.IP
	for _, ip := range ledger.Items {
		if ip.Spec.Owner != nil && ip.Spec.Owner.Namespace == shareBaselineNS {
			theirs = append(theirs, ip)
		}
	}
	if err := fanout.Run(workers, len(theirs), func(i int) error { return operator.Delete(ctx, &theirs[i]) }); err != nil {
		return r, fmt.Errorf("delete the sharing baseline's ledger: %w", err)
	}
	if err := fanout.Run(16, n, func(i int) error { return admin.Delete(ctx, sharedService(shareBaselineNS, i, nil)) }); err != nil {
		return r, fmt.Errorf("delete the sharing baseline's Services: %w", err)
	}

	// The operator, from process start until the 3T Services all hold an address.
	start = time.Now()
	op, err := startOperator(root, dir, opArgs)
	if err != nil {
		return r, err
	}
	<-watch.allServed
	r.allocation = time.Since(start)
	r.opCPU = procmem.CPU(op.Process.Pid, false)
	before := watch.snapshot()
	r.split, r.twoKeys = sharingIntegrity(before)

	_ = op.Process.Signal(syscall.SIGKILL)
	_ = op.Wait()
	start = time.Now()
	if op, err = startOperator(root, dir, opArgs); err != nil {
		return r, err
	}
	defer stopOperator(op)
	if err := waitReady(60 * time.Second); err != nil {
		return r, err
	}
	r.restart = time.Since(start)
	time.Sleep(5 * time.Second) // let it reconcile every Service once more
	after := watch.snapshot()
	r.changed, _ = compare(before, after)
	split, twoKeys := sharingIntegrity(after)
	r.split, r.twoKeys = r.split+split, r.twoKeys+twoKeys
	return r, nil
}

// createRetrying creates obj, again after an error the API server gives
// under load (etcd timed out behind a Service's ClusterIP allocation): the
// set-up is not what is measured.
func createRetrying(ctx context.Context, c client.Client, obj client.Object) error {
	for attempt := 0; ; attempt++ {
		err := c.Create(ctx, obj)
		if err == nil || apierrors.IsAlreadyExists(err) && attempt > 0 {
			return nil
		}
		if retryable := apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) || apierrors.IsInternalError(err) || apierrors.IsInvalid(err) && strings.Contains(err.Error(), "timed out"); attempt == 5 || !retryable {
			return err
		}
		time.Sleep(time.Second)
	}
}

func stopOperator(op *exec.Cmd) {
	_ = op.Process.Signal(syscall.SIGTERM)
	_ = op.Wait()
}

// baselineTriple makes the operator's writes for triple t: the first member
// creates the ledger object, the others join it (an update each, on the
// resourceVersion the last write returned), each status is patched.
func baselineTriple(ctx context.Context, c client.Client, byName map[string]*corev1.Service, t int) error {
	addr := netip.AddrFrom4([4]byte{10, 204, byte(t >> 8), byte(t)})
	ip := &paasv1.IP{}
	for m := range 3 {
		svc := byName[fmt.Sprintf("svc-%d", 3*t+m)]
		owner := paasv1.IPOwner{Namespace: svc.Namespace, Name: svc.Name, UID: svc.UID}
		if m == 0 {
			ip.Name = paasv1.IPObjectName(addr)
			ip.Labels = map[string]string{paasv1.IPGroupLabel: "bench"}
			ip.Annotations = map[string]string{paasv1.OwnerAnnotation: svc.Namespace + "/" + svc.Name}
			ip.Spec = paasv1.IPSpec{Address: addr.String(), IPGroup: "bench", Owner: &owner, SharingKey: svc.Annotations[paasv1.SharingKeyAnnotation]}
			if err := c.Create(ctx, ip, paasv1.FieldOwner); err != nil {
				return err
			}
		} else {
			ip.Spec.SharedWith = append(ip.Spec.SharedWith, owner)
			if err := c.Update(ctx, ip, paasv1.FieldOwner); err != nil {
				return err
			}
		}
		if err := patchServed(ctx, c, svc, addr); err != nil {
			return err
		}
	}
	return nil
}

// sharingIntegrity counts the sharing keys whose Services hold more than one
// address (split) and the addresses held by Services of two keys (twoKeys),
// from a snapshot of Service name -> address (svc-i has key i/3).
func sharingIntegrity(snapshot map[string]string) (split, twoKeys int) {
	addrOf, keyOf := map[int]string{}, map[string]int{}
	splitKeys, doubled := map[int]bool{}, map[string]bool{}
	for name, ip := range snapshot {
		var i int
		if _, err := fmt.Sscanf(strings.TrimPrefix(name, "svc-"), "%d", &i); err != nil {
			continue
		}
		key := i / 3
		if a, ok := addrOf[key]; ok && a != ip {
			splitKeys[key] = true
		}
		addrOf[key] = ip
		if k, ok := keyOf[ip]; ok && k != key {
			doubled[ip] = true
		}
		keyOf[ip] = key
	}
	return len(splitKeys), len(doubled)
}

func (r sharingResult) print(triples int) {
	baseRate, opRate := float64(r.services)/r.baseline.Seconds(), float64(r.services)/r.allocation.Seconds()
	fmt.Printf("  sharing: %d Services in %d sharing triples (TCP 53, UDP 53, TCP 80 on one address each)\n", r.services, triples)
	fmt.Printf("  sharing baseline (create + 2 joins + 3 status patches per triple, no client limit): %.2fs  %.0f Services/s\n", r.baseline.Seconds(), baseRate)
	fmt.Printf("  sharing (process start -> all hold an address):        %8.2fs  %7.0f Services/s  (%.1f CPU-s), ratio %.2f\n", r.allocation.Seconds(), opRate, r.opCPU, opRate/baseRate)
	fmt.Printf("  sharing keys split over two addresses:                 %8d   (target 0)\n", r.split)
	fmt.Printf("  shared IPs held by two sharing keys:                   %8d   (target 0)\n", r.twoKeys)
	fmt.Printf("  shared IPs changed across a SIGKILL restart:           %8d   (target 0; ready after %.2fs)\n", r.changed, r.restart.Seconds())
}
