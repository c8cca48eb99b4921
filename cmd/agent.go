package cmd

import (
	"errors"
	"fmt"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
	"github.com/paas-org/vip-allocator-operator/nodeagent"
)

func newAgentCmd(program string) *cobra.Command {
	conf := nodeagent.Config{Scheme: paasv1.NewScheme()}
	c := &cobra.Command{
		Use:   "agent --node-name NODE",
		Short: "Run the node agent: nftables or iptables from VIP:port to ready endpoints",
		Long: "The agent programs the node's kernel so that each VIP:port reaches the Service's ready endpoints,\n" +
			"and announces the VIPs its node owns (ARP and NDP, or BGP). The operator runs it as a DaemonSet.",
		Example: examples(program,
			"agent --node-name=node1", "on node1, with the in-cluster config, as the DaemonSet runs it",
			"agent --node-name node1 --kubeconfig agent.kubeconfig --dataplane iptables", "outside a pod, with iptables"),
		Args: noArgs,
	}
	fs, raw := agentFlags(&conf)
	zapOpts := zap.Options{}
	bindZapFlags(fs, &zapOpts)
	c.Flags().AddFlagSet(fs)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if conf.NodeName == "" {
			return usageError(c, errors.New("--node-name is required"))
		}
		if err := raw.complete(&conf); err != nil {
			return usageError(c, err)
		}
		setLogger(&zapOpts)
		cfg, err := loadKubeconfig(*raw.kubeconfig, *raw.context)
		if err != nil {
			return err
		}
		cfg.QPS, cfg.Burst = float32(*raw.qps), *raw.burst
		srv, err := nodeagent.NewServer(cfg, conf)
		if err != nil {
			return fmt.Errorf("agent: %w", err)
		}
		return srv.Run(ctrl.SetupSignalHandler())
	}
	cleanup := &cobra.Command{
		Use:   "cleanup",
		Short: "Remove every rule, chain and table the agent ever wrote on this node",
		Long:  "Removes what any agent wrote on this node, with either data plane: for an uninstall, or a node leaving.",
		Example: examples(program,
			"agent cleanup", "on the node, as root",
			"agent cleanup --return-mark-shift 16 --return-table-base 7300", "after agents that ran with another return-path layout"),
		Args: noArgs,
	}
	layout := returnplan.DefaultLayout
	cleanup.Flags().UintVar(&layout.MarkShift, "return-mark-shift", layout.MarkShift, "the agent's --return-mark-shift")
	cleanup.Flags().IntVar(&layout.TableBase, "return-table-base", layout.TableBase, "the agent's --return-table-base")
	cleanup.RunE = func(c *cobra.Command, _ []string) error {
		if err := layout.Validate(-1); err != nil {
			return usageError(c, err)
		}
		return nodeagent.CleanupRulesIn(layout)
	}
	c.AddCommand(cleanup)
	return c
}
