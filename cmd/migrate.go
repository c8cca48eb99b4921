package cmd

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/migration"
)

const migrateUsage = `usage: vip-allocator migrate plan|all [flags]

  plan   for every VirtualIP, what its migration will do and what blocks it (writes nothing)
  all    annotate with virtualips.paas.org/migrate every VirtualIP that can migrate now`

// MigrateOptions are the flags of "migrate plan" and "migrate all".
type MigrateOptions struct {
	Kubeconfig string
	Namespace  string
	// OwnClassOnly and CutoverDelay must match the operator's flags for the
	// plan to say what the operator will do.
	OwnClassOnly bool
	CutoverDelay time.Duration
}

func runMigrate(args []string) error {
	if len(args) == 0 || (args[0] != "plan" && args[0] != "all") {
		return errors.New(migrateUsage)
	}
	verb := args[0]
	var o MigrateOptions
	fs := flag.NewFlagSet("migrate "+verb, flag.ContinueOnError)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster config, or $KUBECONFIG")
	fs.StringVar(&o.Namespace, "namespace", "", "only the VirtualIPs of this namespace; empty: all")
	fs.BoolVar(&o.OwnClassOnly, "own-class-only", false, "as the operator's flag")
	fs.DurationVar(&o.CutoverDelay, "migration-cutover-delay", migration.DefaultCutoverDelay, "as the operator's flag")
	fs.DurationVar(&o.CutoverDelay, "migration-handover-delay", migration.DefaultCutoverDelay, "deprecated: the former name of --migration-cutover-delay")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = 50, 100
	ctx := context.Background()
	if verb == "plan" {
		_, err = MigratePlan(ctx, cfg, o, os.Stdout)
		return err
	}
	return MigrateAll(ctx, cfg, o, os.Stdout)
}

// VirtualIPPlan is the plan of one VirtualIP.
type VirtualIPPlan struct {
	VIP  *paasv1.VirtualIP
	Plan migration.Plan
}

// MigratePlan prints, for every VirtualIP, what its migration will do or what
// blocks it, and returns the plans. It only reads (through an informer cache,
// so a thousand VirtualIPs cost a handful of list calls).
func MigratePlan(ctx context.Context, cfg *rest.Config, o MigrateOptions, out io.Writer) ([]VirtualIPPlan, error) {
	plans, err := planAll(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
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
	return plans, nil
}

// MigrateAll annotates every VirtualIP whose plan is not blocked and that is
// not annotated yet; the operator then migrates them concurrently.
func MigrateAll(ctx context.Context, cfg *rest.Config, o MigrateOptions, out io.Writer) error {
	plans, err := planAll(ctx, cfg, o)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return err
	}
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

func planAll(ctx context.Context, cfg *rest.Config, o MigrateOptions) ([]VirtualIPPlan, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reader, err := cache.New(cfg, cache.Options{Scheme: Scheme(), DefaultTransform: slimObject})
	if err != nil {
		return nil, fmt.Errorf("create cache: %w", err)
	}
	go func() { _ = reader.Start(ctx) }()
	if !reader.WaitForCacheSync(ctx) {
		return nil, errors.New("cache did not sync")
	}
	var vips paasv1.VirtualIPList
	var opts []client.ListOption
	if o.Namespace != "" {
		opts = append(opts, client.InNamespace(o.Namespace))
	}
	if err := reader.List(ctx, &vips, opts...); err != nil {
		return nil, fmt.Errorf("list VirtualIPs: %w", err)
	}
	slices.SortFunc(vips.Items, func(x, y paasv1.VirtualIP) int {
		return strings.Compare(x.Namespace+"/"+x.Name, y.Namespace+"/"+y.Name)
	})
	now := time.Now()
	var out []VirtualIPPlan
	for i := range vips.Items {
		vip := &vips.Items[i]
		observed, err := migration.Observe(ctx, reader, vip, migration.Options{OwnClassOnly: o.OwnClassOnly, CutoverDelay: o.CutoverDelay}, now)
		if err != nil {
			return nil, fmt.Errorf("observe %s/%s: %w", vip.Namespace, vip.Name, err)
		}
		out = append(out, VirtualIPPlan{VIP: vip, Plan: migration.PlanFor(observed)})
	}
	return out, nil
}
