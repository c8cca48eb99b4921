package cmd

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"io"
	"os"
	"slices"

	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/migration"
)

// MetalLBOptions are the flags of "migrate metallb plan|apply".
type MetalLBOptions struct {
	Kubeconfig       string
	MetalLBNamespace string
	migration.MetalLBApplyOptions
}

func runMigrateMetalLB(args []string) error {
	if len(args) == 0 || !slices.Contains([]string{"plan", "apply"}, args[0]) {
		return errors.New(migrateUsage)
	}
	verb := args[0]
	var o MetalLBOptions
	fs := flag.NewFlagSet("migrate metallb "+verb, flag.ContinueOnError)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster config, or $KUBECONFIG")
	fs.StringVar(&o.MetalLBNamespace, "metallb-namespace", "metallb-system", "the namespace MetalLB runs in and reads its objects from")
	fs.StringVar(&o.OperatorNamespace, "operator-namespace", paasv1.DefaultNamespace, "the operator's namespace (apply writes the BGP password Secret there; plan reads the agents' DaemonSet there)")
	fs.BoolVar(&o.ScaleDownController, "scale-down-controller", false, "apply: scale MetalLB's controller Deployment (the one the plan names) to 0 once everything is created")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	cfg, err := loadKubeconfig(o.Kubeconfig)
	if err != nil {
		return err
	}
	if verb == "plan" {
		_, err = MetalLBPlan(context.Background(), cfg, o, os.Stdout)
		return err
	}
	return MetalLBApply(context.Background(), cfg, o, os.Stdout)
}

// MetalLBPlan prints what "migrate metallb apply" creates and what becomes of each Service
// MetalLB serves, and returns the plan. It only reads.
func MetalLBPlan(ctx context.Context, cfg *rest.Config, o MetalLBOptions, out io.Writer) (migration.MetalLBPlan, error) {
	c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		return migration.MetalLBPlan{}, err
	}
	st, err := migration.ReadMetalLB(ctx, c, cmp.Or(o.MetalLBNamespace, "metallb-system"), cmp.Or(o.OperatorNamespace, paasv1.DefaultNamespace))
	if err != nil {
		return migration.MetalLBPlan{}, err
	}
	p := migration.ConvertMetalLB(st)
	migration.PrintMetalLBPlan(out, p)
	return p, nil
}

// MetalLBApply creates what the plan shows; it is idempotent.
func MetalLBApply(ctx context.Context, cfg *rest.Config, o MetalLBOptions, out io.Writer) error {
	p, err := MetalLBPlan(ctx, cfg, o, io.Discard)
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		return err
	}
	o.OperatorNamespace = cmp.Or(o.OperatorNamespace, paasv1.DefaultNamespace)
	return migration.ApplyMetalLB(ctx, c, p, o.MetalLBApplyOptions, out)
}
