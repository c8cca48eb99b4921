package main

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/fanout"
)

// timeBaseline makes the operator's two writes for every pending Service,
// workers at once, and returns the time until the watch w saw all served.
func timeBaseline(ctx context.Context, c client.Client, pending []corev1.Service, w *ipWatch, workers int) (time.Duration, error) {
	start := time.Now()
	if err := fanout.Run(workers, len(pending), func(i int) error { return baselineWrites(ctx, c, &pending[i], i) }); err != nil {
		return 0, fmt.Errorf("baseline: %w", err)
	}
	<-w.allServed
	return time.Since(start), nil
}

// baselineAgain measures the baseline again, while the operator is down, on n
// new Services in the new namespace ns, which go again before it restarts.
// The machine is shared, so its load drifts over a run: the operator's figure
// is compared with the mean of a baseline before it and one after it.
func baselineAgain(ctx context.Context, admin, c client.Client, cs *kubernetes.Clientset, ns string, n, workers int) (time.Duration, error) {
	w, err := pendingServices(ctx, admin, cs, ns, n, ptr.To("bench.example/baseline"))
	if err != nil {
		return 0, err
	}
	var pending corev1.ServiceList
	if err := c.List(ctx, &pending, client.InNamespace(ns)); err != nil {
		return 0, err
	}
	took, err := timeBaseline(ctx, c, pending.Items, w, workers)
	if err != nil {
		return 0, err
	}
	// Gone before the operator restarts: it would cache them and collect their ledger.
	return took, clearNamespace(ctx, admin, c, ns, n, workers)
}

// pendingServices creates the namespace ns and n LoadBalancer Services of the
// class in it, and returns a watch of their IPs.
func pendingServices(ctx context.Context, admin client.Client, cs *kubernetes.Clientset, ns string, n int, class *string) (*ipWatch, error) {
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}); err != nil {
		return nil, err
	}
	if err := fanout.Run(16, n, func(i int) error { return admin.Create(ctx, service(ns, i, class)) }); err != nil {
		return nil, err
	}
	return watchIPs(ctx, cs, ns, n)
}

// clearNamespace deletes the n Services of ns and their ledger objects, as a
// stopped operator leaves them.
func clearNamespace(ctx context.Context, admin, c client.Client, ns string, n, workers int) error {
	var ledger paasv1.IPList
	if err := c.List(ctx, &ledger); err != nil {
		return err
	}
	var theirs []paasv1.IP
	for _, ip := range ledger.Items {
		if ip.Spec.Owner != nil && ip.Spec.Owner.Namespace == ns {
			theirs = append(theirs, ip)
		}
	}
	if err := fanout.Run(workers, len(theirs), func(i int) error { return c.Delete(ctx, &theirs[i]) }); err != nil {
		return fmt.Errorf("delete the ledger of %s: %w", ns, err)
	}
	if err := fanout.Run(16, n, func(i int) error { return admin.Delete(ctx, service(ns, i, nil)) }); err != nil {
		return fmt.Errorf("delete the Services of %s: %w", ns, err)
	}
	return nil
}
