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

// baselineAgainNS holds the second baseline's Services.
const baselineAgainNS = "baseline-again"

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

// baselineAgain measures the baseline a second time, while the operator is
// down, on n new Services that go again before it restarts. The machine is
// shared, so its load drifts over a run: the operator's figure is compared
// with the mean of a baseline before it and one after it.
func baselineAgain(ctx context.Context, admin, c client.Client, cs *kubernetes.Clientset, n, workers int) (time.Duration, error) {
	if err := admin.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: baselineAgainNS}}); err != nil {
		return 0, err
	}
	if err := fanout.Run(16, n, func(i int) error {
		return admin.Create(ctx, service(baselineAgainNS, i, ptr.To("bench.example/baseline")))
	}); err != nil {
		return 0, err
	}
	w, err := watchIPs(ctx, cs, baselineAgainNS, n)
	if err != nil {
		return 0, err
	}
	var pending corev1.ServiceList
	if err := c.List(ctx, &pending, client.InNamespace(baselineAgainNS)); err != nil {
		return 0, err
	}
	took, err := timeBaseline(ctx, c, pending.Items, w, workers)
	if err != nil {
		return 0, err
	}
	// Gone before the operator restarts: it would cache them and collect their ledger.
	var ledger paasv1.IPList
	if err := c.List(ctx, &ledger); err != nil {
		return 0, err
	}
	var theirs []paasv1.IP
	for _, ip := range ledger.Items {
		if ip.Spec.Owner != nil && ip.Spec.Owner.Namespace == baselineAgainNS {
			theirs = append(theirs, ip)
		}
	}
	if err := fanout.Run(workers, len(theirs), func(i int) error { return c.Delete(ctx, &theirs[i]) }); err != nil {
		return 0, fmt.Errorf("delete the second baseline's ledger: %w", err)
	}
	if err := fanout.Run(16, n, func(i int) error { return admin.Delete(ctx, service(baselineAgainNS, i, nil)) }); err != nil {
		return 0, fmt.Errorf("delete the second baseline's Services: %w", err)
	}
	return took, nil
}
