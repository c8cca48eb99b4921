package cmd

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/yaml"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/explain"
)

// explainFlags are explain's own flags; the kubeconfig flags are kubectl's.
type explainFlags struct {
	output, drain, agentNamespace, agentToken string
	agentURLs                                 map[string]string
	agentPort                                 int
	timeout                                   time.Duration
}

// runExplain is `vip-allocator explain` (and `kubectl vip explain`): cobra
// with kubectl's kubeconfig flags, for this command alone; the others keep
// the standard library's flag sets.
func runExplain(args []string) error {
	var f explainFlags
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	c := &cobra.Command{
		Use:   "explain (svc/NAME | ip ADDRESS | ipgroup NAME | node NAME)",
		Short: "Explain, step by step, why an address answers or not",
		Long: "Each step from allocation to announcement, with ✓ or ✗ and what to do: the IPGroups, the ledger,\n" +
			"the election of the nodes, each node's kernel, the announcement, the failover history.",
		Args:          cobra.RangeArgs(1, 2),
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE: func(c *cobra.Command, args []string) error {
			cc := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
			return explainRun(c.Context(), cc, args, f)
		},
	}
	fs := c.Flags()
	fs.StringVar(&rules.ExplicitPath, "kubeconfig", "", "path to the kubeconfig file")
	clientcmd.BindOverrideFlags(overrides, fs, clientcmd.RecommendedConfigOverrideFlags(""))
	fs.StringVarP(&f.output, "output", "o", "", "json or yaml; empty: for a person")
	fs.StringVar(&f.drain, "what-if-drain", "", "also run the election without this node and print which addresses move where")
	fs.StringVar(&f.agentNamespace, "agent-namespace", paasv1.DefaultNamespace, "the agents' namespace")
	fs.IntVar(&f.agentPort, "agent-port", paasv1.AgentMetricsPort, "the agents' metrics port")
	fs.StringToStringVar(&f.agentURLs, "agent-url", nil, "node=https://ADDRESS:PORT: ask that agent directly, not through the API server (labs whose agents are not pods)")
	fs.StringVar(&f.agentToken, "agent-token", "", "the token to present to the agents; empty: a 10-minute token of ServiceAccount vip-allocator-explain")
	fs.DurationVar(&f.timeout, "agent-timeout", 5*time.Second, "how long each agent may take to answer")
	c.SetArgs(args)
	if err := c.ExecuteContext(context.Background()); err != nil {
		return err
	}
	if help, _ := fs.GetBool("help"); help {
		return flag.ErrHelp
	}
	return nil
}

func explainRun(ctx context.Context, cc clientcmd.ClientConfig, args []string, f explainFlags) error {
	// What is asked is checked before the kubeconfig, which may be missing.
	ns, _, nsErr := cc.Namespace()
	kind, name, ok := strings.Cut(args[0], "/")
	if !ok && len(args) == 2 {
		kind, name = args[0], args[1]
	}
	pick, report, err := explain.Subject(kind, name, ns)
	if err != nil {
		return err
	}
	if nsErr != nil {
		return nsErr
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return err
	}
	c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		return err
	}
	kube, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	r := &explain.Reader{Client: c, Kube: kube, Namespace: f.agentNamespace, AgentPort: f.agentPort, AgentURLs: f.agentURLs,
		Token: f.agentToken, Timeout: f.timeout}
	o, err := r.Read(ctx, pick)
	if err != nil {
		return err
	}
	rep, err := report(o)
	if err != nil {
		return err
	}
	if f.drain != "" {
		d := explain.WhatIfDrain(o, rep, f.drain)
		rep.WhatIfDrain = &d
	}
	return printReport(rep, f.output)
}

func printReport(r explain.Report, output string) error {
	switch output {
	case "":
		return explain.Render(os.Stdout, r)
	case "json":
		enc := json.NewEncoder(os.Stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(r)
	case "yaml":
		b, err := yaml.Marshal(r)
		if err != nil {
			return err
		}
		_, err = os.Stdout.Write(b)
		return err
	}
	return fmt.Errorf("-o %q: want json or yaml", output)
}
