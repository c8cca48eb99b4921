package cmd

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"time"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/slimcache"
	"github.com/paas-org/vip-allocator-operator/migration"
)

const migrateUsage = `usage: vip-allocator migrate plan|all|upgrade|metallb [flags]

  plan     for every VirtualIP, what its migration will do and what blocks it, and what
           the upgrade of the original operator's installation will do (writes nothing)
  all      annotate with virtualips.paas.org/migrate every VirtualIP that can migrate now
  upgrade  remove what the original operator left that would race or block this one:
           its Deployment, its webhook configuration, its bindings and ServiceAccount, each
           by name, content and uid; look-alikes are named by the plan and left
  metallb plan   what MetalLB's pools, advertisements and peers become, what is not carried
                 over and why, the address each Service keeps, and whether MetalLB's speakers
                 gossip on the agents' port (writes nothing)
  metallb apply  create the IPGroups and BGPPeers (and the BGP password Secret) the plan shows;
                 nothing while the gossip ports clash`

// MigrateOptions are the flags of "migrate plan", "migrate all" and "migrate upgrade".
type MigrateOptions struct {
	Kubeconfig string
	Namespace  string
	// OwnClassOnly and CutoverDelay must match the operator's flags for the
	// plan to say what the operator will do.
	OwnClassOnly bool
	CutoverDelay time.Duration
	// OperatorNamespace is where the operator, and the original before it, is installed.
	OperatorNamespace string
}

func runMigrate(args []string) error {
	if len(args) > 0 && args[0] == "metallb" {
		return runMigrateMetalLB(args[1:])
	}
	if len(args) == 0 || !slices.Contains([]string{"plan", "all", "upgrade"}, args[0]) {
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
	fs.StringVar(&o.OperatorNamespace, "operator-namespace", paasv1.DefaultNamespace, "the operator's namespace (the original's, upgraded in place)")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	setLogger(&zapOpts)
	cfg, err := loadKubeconfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = 50, 100
	ctx := context.Background()
	switch verb {
	case "plan":
		_, err = MigratePlan(ctx, cfg, o, os.Stdout)
		return err
	case "upgrade":
		return MigrateUpgrade(ctx, cfg, o, os.Stdout)
	}
	return MigrateAll(ctx, cfg, o, os.Stdout)
}

// MigratePlan prints, for every VirtualIP, what its migration will do or what
// blocks it, and returns the plans. It only reads (through an informer cache,
// so a thousand VirtualIPs cost a handful of list calls).
func MigratePlan(ctx context.Context, cfg *rest.Config, o MigrateOptions, out io.Writer) ([]migration.VirtualIPPlan, error) {
	plans, err := planAll(ctx, cfg, o)
	if err != nil {
		return nil, err
	}
	migration.PrintPlans(out, plans)
	c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		return nil, err
	}
	fmt.Fprintln(out)
	if _, err := migration.PlanUpgradeOf(ctx, c, cmp.Or(o.OperatorNamespace, paasv1.DefaultNamespace), o.OwnClassOnly, out); err != nil {
		return nil, fmt.Errorf("plan the upgrade of the original operator: %w", err)
	}
	return plans, nil
}

// MigrateUpgrade removes what the original operator left that would race or
// block this one (its Deployment, webhook configuration, bindings and
// ServiceAccount) and says what the operator adopts.
func MigrateUpgrade(ctx context.Context, cfg *rest.Config, o MigrateOptions, out io.Writer) error {
	c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		return err
	}
	return migration.Upgrade(ctx, c, cmp.Or(o.OperatorNamespace, paasv1.DefaultNamespace), o.OwnClassOnly, out)
}

// MigrateAll annotates every VirtualIP whose plan is not blocked and that is
// not annotated yet; the operator then migrates them concurrently.
func MigrateAll(ctx context.Context, cfg *rest.Config, o MigrateOptions, out io.Writer) error {
	plans, err := planAll(ctx, cfg, o)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		return err
	}
	return migration.AnnotateAll(ctx, c, plans, out)
}

// planAll plans every VirtualIP from an informer cache started for the call.
func planAll(ctx context.Context, cfg *rest.Config, o MigrateOptions) ([]migration.VirtualIPPlan, error) {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	reader, err := cache.New(cfg, cache.Options{Scheme: paasv1.NewScheme(), DefaultTransform: slimcache.Transform})
	if err != nil {
		return nil, fmt.Errorf("create cache: %w", err)
	}
	go func() { _ = reader.Start(ctx) }()
	if !reader.WaitForCacheSync(ctx) {
		return nil, errors.New("cache did not sync")
	}
	return migration.PlanAll(ctx, reader, o.Namespace, migration.Options{OwnClassOnly: o.OwnClassOnly, CutoverDelay: o.CutoverDelay})
}
