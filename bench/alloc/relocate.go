package main

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// The relocation phase: the bench IPGroup's segment moves and every Service
// must move with it. Its baseline is a plain client making the operator's
// three writes per move (new ledger object, status patch, old ledger delete).

var (
	baselineFrom = netip.MustParsePrefix("10.201.0.0/16") // where baselineWrites put them
	baselineTo   = netip.MustParsePrefix("10.203.0.0/16")
	relocatedTo  = netip.MustParsePrefix("10.202.0.0/16")
)

// nthAddr is address i of a /16.
func nthAddr(p netip.Prefix, i int) netip.Addr {
	b := p.Addr().As4()
	return netip.AddrFrom4([4]byte{b[0], b[1], byte(i >> 8), byte(i)})
}

// baselineMove makes, for Service i, the three writes the operator makes to
// move it from its baseline address to one in baselineTo.
func baselineMove(ctx context.Context, c client.Client, svc *corev1.Service, i int) error {
	from, to := nthAddr(baselineFrom, i), nthAddr(baselineTo, i)
	ip := &paasv1.IP{
		ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(to),
			Labels:      map[string]string{paasv1.IPGroupLabel: "bench"},
			Annotations: map[string]string{paasv1.OwnerAnnotation: baselineNS + "/" + svc.Name}},
		Spec: paasv1.IPSpec{Address: to.String(), IPGroup: "bench",
			Owner: &paasv1.IPOwner{Namespace: baselineNS, Name: svc.Name, UID: svc.UID}},
	}
	if err := c.Create(ctx, ip, paasv1.FieldOwner); err != nil {
		return err
	}
	if err := patchServed(ctx, c, svc, to); err != nil {
		return err
	}
	old := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(from)}}
	return c.Delete(ctx, old)
}

// relocate moves the bench IPGroup to relocatedTo and returns the time until
// every one of the n Services holds an address there.
func relocate(ctx context.Context, admin client.Client, w *ipWatch, n int) (time.Duration, error) {
	var group paasv1.IPGroup
	if err := admin.Get(ctx, types.NamespacedName{Name: "bench"}, &group); err != nil {
		return 0, err
	}
	group.Spec.Segment = relocatedTo.String()
	// Released with the edit: without it the Services keep their addresses.
	group.Annotations = map[string]string{paasv1.ReleaseAddressesAnnotation: "true"}
	start := time.Now()
	if err := admin.Update(ctx, &group); err != nil {
		return 0, fmt.Errorf("move the bench IPGroup: %w", err)
	}
	if err := w.waitAllIn(relocatedTo, n, 5*time.Minute); err != nil {
		return 0, err
	}
	return time.Since(start), nil
}

// waitAllIn waits until n Services hold an address inside p.
func (w *ipWatch) waitAllIn(p netip.Prefix, n int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for time.Now().Before(deadline) {
		in := 0
		for _, ip := range w.snapshot() {
			if addr, err := netip.ParseAddr(ip); err == nil && p.Contains(addr) {
				in++
			}
		}
		if in == n {
			return nil
		}
		time.Sleep(10 * time.Millisecond)
	}
	return fmt.Errorf("not all %d Services hold an address in %s after %s", n, p, timeout)
}
