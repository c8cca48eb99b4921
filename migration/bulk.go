package migration

import (
	"context"
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// What `vip-allocator migrate plan` and `migrate all` do for a whole cluster:
// plan every VirtualIP from one reading, print the plans, and annotate the
// ones that can migrate so the operator migrates them concurrently.

// VirtualIPPlan is the plan of one VirtualIP.
type VirtualIPPlan struct {
	VIP  *paasv1.VirtualIP
	Plan Plan
}

// PlanAll plans every VirtualIP of namespace (empty: all), sorted by
// namespace/name. r should be a cache: a thousand VirtualIPs then cost a
// handful of list calls.
func PlanAll(ctx context.Context, r client.Reader, namespace string, o Options) ([]VirtualIPPlan, error) {
	var vips paasv1.VirtualIPList
	var opts []client.ListOption
	if namespace != "" {
		opts = append(opts, client.InNamespace(namespace))
	}
	if err := r.List(ctx, &vips, opts...); err != nil {
		if meta.IsNoMatchError(err) {
			return nil, nil // the original 1.0, before our bundle: no VirtualIP CRD, no VirtualIPs
		}
		return nil, fmt.Errorf("list VirtualIPs: %w", err)
	}
	slices.SortFunc(vips.Items, func(x, y paasv1.VirtualIP) int {
		return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name)
	})
	now := time.Now()
	var out []VirtualIPPlan
	for i := range vips.Items {
		vip := &vips.Items[i]
		observed, err := Observe(ctx, r, vip, o, now)
		if err != nil {
			return nil, fmt.Errorf("observe %s/%s: %w", vip.Namespace, vip.Name, err)
		}
		out = append(out, VirtualIPPlan{VIP: vip, Plan: PlanFor(observed)})
	}
	return out, nil
}

// PrintPlans writes, for every VirtualIP, what its migration will do or what
// blocks it, and a summary.
func PrintPlans(out io.Writer, plans []VirtualIPPlan) {
	var ready, blocked, running, done int
	for _, p := range plans {
		vip := p.VIP
		fmt.Fprintf(out, "%s/%s  ip=%s  service=%s  state=%q", vip.Namespace, vip.Name, vip.Status.IP, vip.Spec.Service, vip.Status.State)
		if vip.MigrationRequested() {
			fmt.Fprint(out, "  (annotated)")
		}
		fmt.Fprintln(out)
		switch {
		case p.Plan.Done:
			done++
			fmt.Fprintln(out, "  nothing to do: migrated")
			continue
		case p.Plan.Blocked != "":
			blocked++
		case vip.MigrationRequested():
			running++
		default:
			ready++
		}
		for i, s := range p.Plan.Steps {
			fmt.Fprintf(out, "  %d. %s\n", i+1, s)
		}
		if p.Plan.Blocked != "" {
			fmt.Fprintf(out, "  BLOCKED: %s\n", p.Plan.Blocked)
		}
	}
	fmt.Fprintf(out, "\n%d VirtualIPs: %d can migrate, %d blocked, %d migrating, %d migrated\n", len(plans), ready, blocked, running, done)
}

// AnnotateAll annotates every VirtualIP whose plan is not blocked and that is
// not annotated yet, 16 at a time; the operator then migrates them
// concurrently.
func AnnotateAll(ctx context.Context, c client.Client, plans []VirtualIPPlan, out io.Writer) error {
	var todo []*paasv1.VirtualIP
	for _, p := range plans {
		switch {
		case p.Plan.Done || p.VIP.MigrationRequested():
		case p.Plan.Blocked != "":
			fmt.Fprintf(out, "skipped %s/%s: %s\n", p.VIP.Namespace, p.VIP.Name, p.Plan.Blocked)
		default:
			todo = append(todo, p.VIP)
		}
	}
	var mu sync.Mutex
	var errs []error
	sem := make(chan struct{}, 16)
	var wg sync.WaitGroup
	for _, vip := range todo {
		wg.Add(1)
		sem <- struct{}{}
		go func() {
			defer wg.Done()
			defer func() { <-sem }()
			patch := client.RawPatch("application/merge-patch+json",
				[]byte(fmt.Sprintf(`{"metadata":{"annotations":{%q:""}}}`, paasv1.MigrateAnnotation)))
			err := c.Patch(ctx, vip, patch)
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, fmt.Errorf("annotate %s/%s: %w", vip.Namespace, vip.Name, err))
				return
			}
			fmt.Fprintf(out, "annotated %s/%s\n", vip.Namespace, vip.Name)
		}()
	}
	wg.Wait()
	fmt.Fprintf(out, "%d VirtualIPs annotated for migration; follow them with: kubectl get vip -A\n", len(todo)-len(errs))
	return errors.Join(errs...)
}
