package cmd

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func newCompletionCmd(program string) *cobra.Command {
	shells := []string{"bash", "zsh", "fish", "powershell"}
	c := &cobra.Command{
		Use:   "completion (bash | zsh | fish | powershell)",
		Short: "Print the shell's completion script: commands, flags and svc/NAME",
		Long: "Prints the script that completes this program's commands, flags and their values, and the\n" +
			"Services, IPGroups, addresses and nodes of the cluster (read through the kubeconfig).\n\n" +
			"kubectl completes \"kubectl vip\" (kubectl 1.26 and later) by running kubectl_complete-vip:\n" +
			"link it to this binary on the PATH, next to kubectl-vip; kubectl's own completion script\n" +
			"does the rest.",
		Example: examples(program,
			"completion bash > /etc/bash_completion.d/vip-allocator", "bash, for every shell started from now on",
			"completion zsh > \"${fpath[1]}/_vip-allocator\"", "zsh",
			"completion fish > ~/.config/fish/completions/vip-allocator.fish", "fish",
			"completion bash | source /dev/stdin", "bash, in this shell only") +
			"\n\n  # kubectl vip: kubectl runs kubectl_complete-vip for the words after \"kubectl vip\"\n" +
			"  ln -s \"$(command -v kubectl-vip)\" \"$(dirname \"$(command -v kubectl-vip)\")/kubectl_complete-vip\"",
		ValidArgs:             shells,
		DisableFlagsInUseLine: true,
		Args:                  cobra.MatchAll(cobra.ExactArgs(1), cobra.OnlyValidArgs),
	}
	noDesc := c.Flags().Bool("no-descriptions", false, "complete without the descriptions of commands and flags")
	c.RunE = func(c *cobra.Command, args []string) error {
		root, out := c.Root(), c.OutOrStdout()
		switch args[0] {
		case "bash":
			return root.GenBashCompletionV2(out, !*noDesc)
		case "zsh":
			if *noDesc {
				return root.GenZshCompletionNoDesc(out)
			}
			return root.GenZshCompletion(out)
		case "fish":
			return root.GenFishCompletion(out, !*noDesc)
		}
		return root.GenPowerShellCompletionWithDesc(out)
	}
	return c
}

// completionTimeout bounds each read of the cluster for a completion: a
// shell waits for it.
const completionTimeout = 5 * time.Second

// The kinds explain takes, with the names kubectl gives them.
var subjectKinds = map[string][]string{
	"svc":     {"svc", "service", "services"},
	"ip":      {"ip", "ips"},
	"ipgroup": {"ipgroup", "ipgroups", "ipg"},
	"node":    {"node", "nodes", "no"},
}

// kindOf is the kind named by any of its names, or "".
func kindOf(name string) string {
	for kind, names := range subjectKinds {
		if slices.Contains(names, name) {
			return kind
		}
	}
	return ""
}

// completeSubject completes explain's arguments: svc/NAME with the LoadBalancer
// Services of the namespace, or a kind and then its IPGroups, addresses or nodes.
func completeSubject(ctx context.Context, cc clientcmd.ClientConfig, args []string, toComplete string) ([]string, cobra.ShellCompDirective) {
	const done = cobra.ShellCompDirectiveNoFileComp
	switch {
	case len(args) == 1 && !strings.Contains(args[0], "/"):
		names, err := clusterNames(ctx, cc, kindOf(args[0]))
		if err != nil {
			return cobra.AppendActiveHelp(nil, err.Error()), done
		}
		return filterPrefix(names, toComplete), done
	case len(args) > 0:
		return nil, done
	}
	if kind, prefix, ok := strings.Cut(toComplete, "/"); ok {
		if kindOf(kind) != "svc" {
			return nil, done
		}
		return servicesAs(ctx, cc, kind+"/", prefix)
	}
	var kinds []string
	for _, k := range []string{"svc/", "ip", "ipgroup", "node"} {
		if strings.HasPrefix(k, toComplete) {
			kinds = append(kinds, k)
		}
	}
	if len(kinds) == 1 && kinds[0] == "svc/" {
		return servicesAs(ctx, cc, "svc/", "")
	}
	return kinds, done | cobra.ShellCompDirectiveNoSpace
}

// servicesAs completes the Services whose name starts with prefix, each as kind/NAME.
func servicesAs(ctx context.Context, cc clientcmd.ClientConfig, kind, prefix string) ([]string, cobra.ShellCompDirective) {
	const done = cobra.ShellCompDirectiveNoFileComp
	names, err := clusterNames(ctx, cc, "svc")
	if err != nil {
		return cobra.AppendActiveHelp(nil, err.Error()), done
	}
	var out []string
	for _, n := range filterPrefix(names, prefix) {
		out = append(out, kind+n)
	}
	return out, done
}

// clusterNames lists, sorted, the names of kind in the cluster: the
// LoadBalancer Services of the namespace, the IPGroups, the allocated
// addresses or the nodes.
func clusterNames(ctx context.Context, cc clientcmd.ClientConfig, kind string) ([]string, error) {
	ctx, cancel := context.WithTimeout(ctx, completionTimeout)
	defer cancel()
	if kind == "" {
		return nil, nil
	}
	cfg, err := cc.ClientConfig()
	if err != nil {
		return nil, err
	}
	cfg.Timeout = completionTimeout
	c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
	if err != nil {
		return nil, err
	}
	var names []string
	switch kind {
	case "svc":
		ns, _, err := cc.Namespace()
		if err != nil {
			return nil, err
		}
		var l corev1.ServiceList
		if err := c.List(ctx, &l, client.InNamespace(ns)); err != nil {
			return nil, err
		}
		for _, s := range l.Items {
			if s.Spec.Type == corev1.ServiceTypeLoadBalancer {
				names = append(names, s.Name)
			}
		}
	case "ipgroup":
		var l paasv1.IPGroupList
		if err := c.List(ctx, &l); err != nil {
			return nil, err
		}
		for _, g := range l.Items {
			names = append(names, g.Name)
		}
	case "ip":
		var l paasv1.IPList
		if err := c.List(ctx, &l); err != nil {
			return nil, err
		}
		for _, ip := range l.Items {
			if addr, ok := ip.Addr(); ok {
				names = append(names, addr.String())
			}
		}
	case "node":
		var l corev1.NodeList
		if err := c.List(ctx, &l); err != nil {
			return nil, err
		}
		for _, n := range l.Items {
			names = append(names, n.Name)
		}
	case "namespace":
		var l corev1.NamespaceList
		if err := c.List(ctx, &l); err != nil {
			return nil, err
		}
		for _, n := range l.Items {
			names = append(names, n.Name)
		}
	default:
		return nil, fmt.Errorf("no names of %q to complete", kind)
	}
	slices.Sort(names)
	return names, nil
}

func filterPrefix(names []string, prefix string) []string {
	var out []string
	for _, n := range names {
		if strings.HasPrefix(n, prefix) {
			out = append(out, n)
		}
	}
	return out
}

// flagClientConfig is the kubeconfig c's own --kubeconfig, --context and
// --namespace name (those it has).
func flagClientConfig(c *cobra.Command) clientcmd.ClientConfig {
	rules := clientcmd.NewDefaultClientConfigLoadingRules()
	overrides := &clientcmd.ConfigOverrides{}
	if f := c.Flag("kubeconfig"); f != nil {
		rules.ExplicitPath = f.Value.String()
	}
	if f := c.Flag("context"); f != nil {
		overrides.CurrentContext = f.Value.String()
	}
	return clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, overrides)
}

// completeFlags completes the values of the flags of every command in the
// tree under c that names a namespace, a node, a context or an output format.
func completeFlags(c *cobra.Command, clientConfig func(*cobra.Command) clientcmd.ClientConfig) {
	names := func(kind string) cobra.CompletionFunc {
		return func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
			n, err := clusterNames(context.Background(), clientConfig(c), kind)
			if err != nil {
				return cobra.AppendActiveHelp(nil, err.Error()), cobra.ShellCompDirectiveNoFileComp
			}
			return filterPrefix(n, toComplete), cobra.ShellCompDirectiveNoFileComp
		}
	}
	contexts := func(c *cobra.Command, _ []string, toComplete string) ([]string, cobra.ShellCompDirective) {
		raw, err := clientConfig(c).RawConfig()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp
		}
		var out []string
		for name := range raw.Contexts {
			out = append(out, name)
		}
		slices.Sort(out)
		return filterPrefix(out, toComplete), cobra.ShellCompDirectiveNoFileComp
	}
	fixed := func(values ...string) cobra.CompletionFunc {
		return cobra.FixedCompletions(values, cobra.ShellCompDirectiveNoFileComp)
	}
	byFlag := map[string]cobra.CompletionFunc{
		"namespace":          names("namespace"),
		"operator-namespace": names("namespace"),
		"metallb-namespace":  names("namespace"),
		"agent-namespace":    names("namespace"),
		"node-name":          names("node"),
		"what-if-drain":      names("node"),
		"context":            contexts,
		"output":             fixed("json", "yaml"),
		"ip-mode":            fixed("Proxy", "VIP"),
		"on-cordon":          fixed("handover", "keep"),
		"dataplane":          fixed("auto", "nftables", "iptables"),
		"on-stop":            fixed("auto", "handover", "restart"),
		"liveness-timers":    fixed("tuned", "lan"),
		"zap-log-level":      fixed("debug", "info", "error"),
		"zap-encoder":        fixed("json", "console"),
	}
	var walk func(*cobra.Command)
	walk = func(c *cobra.Command) {
		c.LocalFlags().VisitAll(func(f *pflag.Flag) {
			if complete, ok := byFlag[f.Name]; ok {
				_ = c.RegisterFlagCompletionFunc(f.Name, complete)
			}
		})
		for _, sub := range c.Commands() {
			walk(sub)
		}
	}
	walk(c)
}
