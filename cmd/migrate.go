package cmd

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/slimcache"
	"github.com/paas-org/vip-allocator-operator/migration"
)

// MigrateOptions are the flags of "migrate plan", "migrate all" and "migrate upgrade".
type MigrateOptions struct {
	Kubeconfig string
	Context    string
	Namespace  string
	// OwnClassOnly and CutoverDelay must match the operator's flags for the
	// plan to say what the operator will do.
	OwnClassOnly bool
	CutoverDelay time.Duration
	// OperatorNamespace is where the operator, and the original before it, is installed.
	OperatorNamespace string
}

func newMigrateCmd(program string) *cobra.Command {
	c := &cobra.Command{
		Use:   "migrate",
		Short: "Move Services from the original operator or from MetalLB to this one",
		Long: "plan says what a migration will do and what blocks it and writes nothing; all, upgrade and\n" +
			"metallb apply do it. Run them with an admin's kubeconfig.",
		Example: examples(program,
			"migrate plan", "what the migration of every legacy VirtualIP will do",
			"migrate metallb plan", "what MetalLB's configuration becomes"),
		RunE: groupRun,
	}
	c.AddCommand(
		newMigrateVerbCmd(program, "plan", "For every legacy VirtualIP, what its migration will do and what blocks it (dry run)",
			"For every VirtualIP, what its migration will do and what blocks it, and what the upgrade of the\n"+
				"original operator's installation will do. Writes nothing."),
		newMigrateVerbCmd(program, "all", "Mark every legacy VirtualIP that can migrate with virtualips.paas.org/migrate",
			"Annotates with virtualips.paas.org/migrate every VirtualIP that can migrate now; the operator\n"+
				"then migrates them."),
		newMigrateVerbCmd(program, "upgrade", "Remove what the original operator left that would race or block this one",
			"Removes the original operator's Deployment, its webhook configuration, its bindings and\n"+
				"ServiceAccount, each by name, content and uid; look-alikes are named by the plan and left."),
		newMigrateMetalLBCmd(program),
	)
	return c
}

// newMigrateVerbCmd is "migrate plan", "migrate all" or "migrate upgrade".
func newMigrateVerbCmd(program, verb, short, long string) *cobra.Command {
	var o MigrateOptions
	zapOpts := zap.Options{}
	c := &cobra.Command{
		Use:     verb,
		Short:   short,
		Long:    long,
		Example: examples(program, "migrate "+verb, "every namespace", "migrate "+verb+" -n shop --context prod", "the VirtualIPs of namespace shop, in the cluster of context prod"),
		Args:    noArgs,
	}
	fs := c.Flags()
	bindKubeFlags(fs, &o.Kubeconfig, &o.Context)
	fs.StringVarP(&o.Namespace, "namespace", "n", "", "only the VirtualIPs of this namespace; empty: all")
	fs.BoolVar(&o.OwnClassOnly, "own-class-only", false, "as the operator's flag")
	fs.DurationVar(&o.CutoverDelay, "migration-cutover-delay", migration.DefaultCutoverDelay, "as the operator's flag")
	fs.DurationVar(&o.CutoverDelay, "migration-handover-delay", migration.DefaultCutoverDelay, "deprecated: the former name of --migration-cutover-delay")
	fs.StringVar(&o.OperatorNamespace, "operator-namespace", paasv1.DefaultNamespace, "the operator's namespace (the original's, upgraded in place)")
	bindZapFlags(fs, &zapOpts)
	c.RunE = func(c *cobra.Command, _ []string) error {
		setLogger(&zapOpts)
		cfg, err := loadKubeconfig(o.Kubeconfig, o.Context)
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = 50, 100
		ctx, out := c.Context(), c.OutOrStdout()
		switch verb {
		case "plan":
			_, err = MigratePlan(ctx, cfg, o, out)
			return err
		case "upgrade":
			return MigrateUpgrade(ctx, cfg, o, out)
		}
		return MigrateAll(ctx, cfg, o, out)
	}
	return c
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
