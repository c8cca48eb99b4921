package cmd

import (
	"cmp"
	"context"
	"io"

	"github.com/spf13/cobra"
	"k8s.io/client-go/rest"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/migration"
)

// MetalLBOptions are the flags of "migrate metallb plan|apply".
type MetalLBOptions struct {
	Kubeconfig       string
	Context          string
	MetalLBNamespace string
	migration.MetalLBApplyOptions
}

func newMigrateMetalLBCmd(program string) *cobra.Command {
	c := &cobra.Command{
		Use:   "metallb",
		Short: "Move from MetalLB: its pools, advertisements and peers become IPGroups and BGPPeers",
		Long: "plan says what MetalLB's configuration becomes and the address each Service keeps; apply\n" +
			"creates it.",
		Example: examples(program, "migrate metallb plan", "what apply will create",
			"migrate metallb apply --scale-down-controller", "create it, then stop MetalLB's controller"),
		RunE: groupRun,
	}
	c.AddCommand(
		newMetalLBVerbCmd(program, "plan", "What MetalLB's pools, advertisements and peers become, and the address each Service keeps (dry run)",
			"What MetalLB's pools, advertisements and peers become, what is not carried over and why, the\n"+
				"address each Service keeps, and whether MetalLB's speakers gossip on the agents' port. Writes nothing."),
		newMetalLBVerbCmd(program, "apply", "Create the IPGroups and BGPPeers the plan shows",
			"Creates the IPGroups and BGPPeers (and the BGP password Secret) the plan shows; nothing while the\n"+
				"gossip ports clash. Running it again creates nothing more."),
	)
	return c
}

// newMetalLBVerbCmd is "migrate metallb plan" or "migrate metallb apply".
func newMetalLBVerbCmd(program, verb, short, long string) *cobra.Command {
	var o MetalLBOptions
	c := &cobra.Command{
		Use:   verb,
		Short: short,
		Long:  long,
		Example: examples(program, "migrate metallb "+verb, "MetalLB in metallb-system",
			"migrate metallb "+verb+" --metallb-namespace lb --context prod", "MetalLB in namespace lb, in the cluster of context prod"),
		Args: noArgs,
	}
	fs := c.Flags()
	bindKubeFlags(fs, &o.Kubeconfig, &o.Context)
	fs.StringVar(&o.MetalLBNamespace, "metallb-namespace", "metallb-system", "the namespace MetalLB runs in and reads its objects from")
	fs.StringVar(&o.OperatorNamespace, "operator-namespace", paasv1.DefaultNamespace, "the operator's namespace (apply writes the BGP password Secret there; plan reads the agents' DaemonSet there)")
	fs.BoolVar(&o.ScaleDownController, "scale-down-controller", false, "apply: scale MetalLB's controller Deployment (the one the plan names) to 0 once everything is created")
	c.RunE = func(c *cobra.Command, _ []string) error {
		setErrorLogger()
		cfg, err := loadKubeconfig(o.Kubeconfig, o.Context)
		if err != nil {
			return err
		}
		if verb == "plan" {
			_, err = MetalLBPlan(c.Context(), cfg, o, c.OutOrStdout())
			return err
		}
		return MetalLBApply(c.Context(), cfg, o, c.OutOrStdout())
	}
	return c
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
