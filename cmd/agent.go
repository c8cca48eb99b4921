package cmd

import (
	"errors"
	"flag"
	"fmt"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
	"github.com/paas-org/vip-allocator-operator/nodeagent"
)

func runAgent(args []string) error {
	if len(args) > 0 && args[0] == "cleanup" {
		return runAgentCleanup(args[1:])
	}
	c := nodeagent.Config{Scheme: paasv1.NewScheme()}
	fs, raw := agentFlags(&c)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	setLogger(&zapOpts)
	if c.NodeName == "" {
		return errors.New("agent: --node-name is required")
	}
	if err := raw.complete(&c); err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	cfg, err := loadKubeconfig(*raw.kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(*raw.qps), *raw.burst
	srv, err := nodeagent.NewServer(cfg, c)
	if err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	return srv.Run(ctrl.SetupSignalHandler())
}

// runAgentCleanup removes every rule, chain and table any agent wrote on this node, with
// either data plane.
func runAgentCleanup(args []string) error {
	fs := flag.NewFlagSet("agent cleanup", flag.ContinueOnError)
	l := returnplan.DefaultLayout
	fs.UintVar(&l.MarkShift, "return-mark-shift", l.MarkShift, "the agent's --return-mark-shift")
	fs.IntVar(&l.TableBase, "return-table-base", l.TableBase, "the agent's --return-table-base")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if err := l.Validate(-1); err != nil {
		return err
	}
	return nodeagent.CleanupRulesIn(l)
}

// loadKubeconfig loads the file named by --kubeconfig, else the in-cluster
// config or $KUBECONFIG.
func loadKubeconfig(path string) (*rest.Config, error) {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = path
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, nil).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}
