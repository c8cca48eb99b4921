package cmd

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
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

// newExplainCmd is `vip-allocator explain` (and `kubectl vip explain`), with
// kubectl's flags for the cluster and the namespace.
func newExplainCmd(program string) *cobra.Command {
	var f explainFlags
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	clientConfig := func() clientcmd.ClientConfig {
		return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
	}
	c := &cobra.Command{
		Use:   "explain (svc/NAME | ip ADDRESS | ipgroup NAME | node NAME)",
		Short: "Explain, step by step, why an address answers or not",
		Long: "Each step from allocation to announcement, with ✓ or ✗ and what to do: the IPGroups, the ledger,\n" +
			"the election of the nodes, each node's kernel, the announcement, the failover history.",
		Example: examples(program,
			"explain svc/web -n shop", "the Service shop/web, each of its addresses on each node",
			"explain ip 192.0.2.7 -o yaml", "one address, for a program",
			"explain ipgroup lan --what-if-drain node1", "a group, and where its addresses go if node1 is drained",
			"explain node node1 --context prod", "what node1 announces, in the cluster of context prod"),
		Args: cobra.RangeArgs(1, 2),
		ValidArgsFunction: func(_ *cobra.Command, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			return completeSubject(context.Background(), clientConfig(), args, toComplete)
		},
		RunE: func(c *cobra.Command, args []string) error {
			setErrorLogger()
			return explainRun(c, clientConfig(), args, f)
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
	return c
}

func explainRun(cmd *cobra.Command, cc clientcmd.ClientConfig, args []string, f explainFlags) error {
	// What is asked is checked before the kubeconfig, which may be missing.
	if f.output != "" && f.output != "json" && f.output != "yaml" {
		return usageError(cmd, fmt.Errorf("-o %q: want json or yaml", f.output))
	}
	ns, _, nsErr := cc.Namespace()
	kind, name, ok := strings.Cut(args[0], "/")
	if ok && len(args) == 2 {
		return usageError(cmd, fmt.Errorf("%s %s: name what to explain either as KIND/NAME or as KIND NAME", args[0], args[1]))
	}
	if !ok && len(args) == 2 {
		kind, name = args[0], args[1]
	}
	pick, report, err := explain.Subject(kind, name, ns)
	if err != nil {
		return usageError(cmd, err)
	}
	ctx := cmd.Context()
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
	if f.output == "" {
		return explain.Render(cmd.OutOrStdout(), rep)
	}
	return printObject(cmd.OutOrStdout(), rep, f.output)
}

// printObject writes v as kubectl's -o json or -o yaml do.
func printObject(w io.Writer, v any, output string) error {
	switch output {
	case "json":
		enc := json.NewEncoder(w)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		b, err := yaml.Marshal(v)
		if err != nil {
			return err
		}
		_, err = w.Write(b)
		return err
	}
	return fmt.Errorf("-o %q: want json or yaml", output)
}
