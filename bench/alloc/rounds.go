package main

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"k8s.io/client-go/kubernetes"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// rounds measures the operator and the baseline again, one after the other,
// on fresh pending Services: the speed of this shared VM drifts by a third
// within minutes (one run's ratio spread 0.66 to 1.09 on an idle machine), so
// the verdict is the median of the rounds' ratios, each the operator's rate
// over the mean of the baselines measured just before and just after it.
type rounds struct {
	root, dir     string
	opArgs        []string
	admin, writer client.Client // the writer writes as the operator's ServiceAccount
	cs            *kubernetes.Clientset
	n, workers    int
	ratios        []float64 // the first round's included
}

// more measures k more rounds, starting from the baseline last measured.
// The operator is stopped, and nothing it allocated is left.
func (r *rounds) more(ctx context.Context, k int, lastBaseline time.Duration) error {
	before := lastBaseline
	for i := range k {
		ns := fmt.Sprintf("round-%d", i+2)
		w, err := pendingServices(ctx, r.admin, r.cs, ns, r.n, nil)
		if err != nil {
			return err
		}
		start := time.Now()
		op, err := startOperator(r.root, r.dir, r.opArgs)
		if err != nil {
			return err
		}
		<-w.allServed
		took := time.Since(start)
		stopOperator(op)
		if err := clearNamespace(ctx, r.admin, r.writer, ns, r.n, r.workers); err != nil {
			return err
		}
		after, err := baselineAgain(ctx, r.admin, r.writer, r.cs, ns+"-baseline", r.n, r.workers)
		if err != nil {
			return err
		}
		r.add(took, before, after)
		before = after
	}
	return nil
}

// add records a round: the operator took op, the baselines before and after.
func (r *rounds) add(op, before, after time.Duration) {
	rate := func(d time.Duration) float64 { return float64(r.n) / d.Seconds() }
	r.ratios = append(r.ratios, rate(op)/((rate(before)+rate(after))/2))
}

// median is the median of the ratios.
func (r *rounds) median() float64 {
	s := slices.Sorted(slices.Values(r.ratios))
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func (r *rounds) String() string {
	var each []string
	for _, x := range r.ratios {
		each = append(each, fmt.Sprintf("%.2f", x))
	}
	return fmt.Sprintf("%.2f (rounds: %s)", r.median(), strings.Join(each, ", "))
}
