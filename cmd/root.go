// Package cmd is the vip-allocator command line: one cobra command tree for
// the operator, the agent, the migrations, explain, version and completion.
package cmd

import (
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
	"go.uber.org/zap/zapcore"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	"github.com/paas-org/vip-allocator-operator/internal/lazylog"
)

// The names the binary answers to. Linked as PluginName on the PATH it is
// "kubectl vip"; linked as PluginCompletionName, kubectl asks it for the
// completions of "kubectl vip".
const (
	Name                 = "vip-allocator"
	PluginName           = "kubectl-vip"
	PluginCompletionName = "kubectl_complete-vip"
)

// Exit codes: ExitUsage for input the command line refuses (an unknown
// command or flag, a bad flag value, a missing argument), ExitFailure for a
// command that failed at its work.
const (
	ExitFailure = 1
	ExitUsage   = 2
)

// UsageError is input a command refuses; Main exits with ExitUsage for it.
type UsageError struct {
	// Command is the command path, e.g. "vip-allocator agent".
	Command string
	Err     error
}

func (e *UsageError) Error() string {
	return fmt.Sprintf("%s: %v\nRun '%s --help' for usage.", e.Command, e.Err, e.Command)
}

func (e *UsageError) Unwrap() error { return e.Err }

// usageError makes err, refused by c, a UsageError.
func usageError(c *cobra.Command, err error) error {
	var u *UsageError
	if err == nil || errors.As(err, &u) {
		return err
	}
	return &UsageError{Command: c.CommandPath(), Err: err}
}

// Main runs the command line args (without the program name) as program
// (os.Args[0]) names it, prints an error to stderr and returns the exit code.
func Main(program string, args []string) int {
	root := NewRoot(program)
	switch filepath.Base(program) {
	case PluginCompletionName:
		// kubectl runs it with the words after "kubectl vip" and the word to complete.
		args = append([]string{cobra.ShellCompRequestCmd}, args...)
	}
	root.SetArgs(goStyleLongFlags(root, args))
	err := root.Execute()
	if err == nil {
		return 0
	}
	fmt.Fprintln(os.Stderr, "error:", err)
	var u *UsageError
	if errors.As(err, &u) {
		return ExitUsage
	}
	return ExitFailure
}

// NewRoot is the whole command tree, named for program: "kubectl vip" when
// run as the kubectl plugin, else "vip-allocator".
func NewRoot(program string) *cobra.Command {
	display := Name
	switch filepath.Base(program) {
	case PluginName, PluginCompletionName:
		display = "kubectl vip"
	}
	root := &cobra.Command{
		Use:   Name,
		Short: "Allocates and announces the addresses of LoadBalancer Services",
		Long: "One binary: the operator allocates an IP to each LoadBalancer Service, the agent on each node\n" +
			"forwards and announces it, migrate moves from the original operator or MetalLB, explain says why\n" +
			"an address answers or not. Linked as kubectl-vip on the PATH it is also \"kubectl vip\".",
		Example: examples(display,
			"operator --leader-elect", "run the operator, as its Deployment does",
			"explain svc/web -n shop", "why the address of Service shop/web answers or not",
			"completion bash > /etc/bash_completion.d/vip-allocator", "completion of commands, flags and svc/NAME"),
		Annotations:   map[string]string{cobra.CommandDisplayNameAnnotation: display},
		SilenceUsage:  true,
		SilenceErrors: true,
		RunE:          groupRun,
	}
	root.CompletionOptions.DisableDefaultCmd = true
	root.AddCommand(newOperatorCmd(display), newAgentCmd(display), newMigrateCmd(display),
		newExplainCmd(display), newVersionCmd(display), newCompletionCmd(display))
	root.InitDefaultHelpCmd()
	for _, c := range root.Commands() {
		if c.Name() == "help" {
			c.Example = examples(display, "help explain", "the flags and examples of explain")
		}
	}
	completeFlags(root, flagClientConfig)
	root.SetFlagErrorFunc(usageError)
	refuseAsUsage(root)
	return root
}

// refuseAsUsage makes what every command's argument check refuses a UsageError.
func refuseAsUsage(c *cobra.Command) {
	check := c.Args
	c.Args = func(c *cobra.Command, args []string) error {
		if check == nil {
			return nil
		}
		return usageError(c, check(c, args))
	}
	for _, sub := range c.Commands() {
		refuseAsUsage(sub)
	}
}

// groupRun runs a command that only groups others: the name of one is missing or unknown.
func groupRun(c *cobra.Command, args []string) error {
	var names []string
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			names = append(names, sub.Name())
		}
	}
	if len(args) == 0 {
		return usageError(c, fmt.Errorf("name a command: %s", strings.Join(names, ", ")))
	}
	err := fmt.Sprintf("unknown command %q, want one of %s", args[0], strings.Join(names, ", "))
	if c.SuggestionsMinimumDistance <= 0 {
		c.SuggestionsMinimumDistance = 2
	}
	if s := c.SuggestionsFor(args[0]); len(s) > 0 {
		err += fmt.Sprintf("; did you mean %q?", s[0])
	}
	return usageError(c, errors.New(err))
}

// goStyleLongFlags accepts the single dash the standard library's flag
// package took for long flags (-kubeconfig, -leader-elect=false): such an
// argument gets a second dash when the command it is given to has that flag.
func goStyleLongFlags(root *cobra.Command, args []string) []string {
	if len(args) > 0 && strings.HasPrefix(args[0], "__complete") {
		return args
	}
	c, _, err := root.Find(args)
	if err != nil || c == nil {
		return args
	}
	c.InitDefaultHelpFlag()
	return goStyleFlags(func(name string) bool { return c.Flag(name) != nil }, args)
}

// goStyleFlags gives a second dash to each argument -NAME or -NAME=VALUE
// before "--" whose NAME, longer than a letter, is a flag (has says which).
func goStyleFlags(has func(name string) bool, args []string) []string {
	out := make([]string, 0, len(args))
	for i, a := range args {
		if a == "--" {
			return append(out, args[i:]...)
		}
		name, _, _ := strings.Cut(strings.TrimPrefix(a, "-"), "=")
		if strings.HasPrefix(a, "-") && !strings.HasPrefix(a, "--") && len(name) > 1 && has(name) {
			a = "-" + a
		}
		out = append(out, a)
	}
	return out
}

// examples formats an Example: pairs of a command line (after the program
// name) and what it does.
func examples(program string, pairs ...string) string {
	var b strings.Builder
	for i := 0; i+1 < len(pairs); i += 2 {
		if i > 0 {
			b.WriteString("\n\n")
		}
		fmt.Fprintf(&b, "  # %s\n  %s %s", pairs[i+1], program, pairs[i])
	}
	return b.String()
}

// noArgs refuses any argument: the command takes flags only.
func noArgs(c *cobra.Command, args []string) error {
	if len(args) > 0 {
		return fmt.Errorf("unexpected argument %q: %s takes flags only", args[0], c.CommandPath())
	}
	return nil
}

// bindKubeFlags defines kubectl's --kubeconfig and --context on fs, into kubeconfig and context.
func bindKubeFlags(fs *pflag.FlagSet, kubeconfig, context *string) {
	fs.StringVar(kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster config, or $KUBECONFIG")
	fs.StringVar(context, "context", "", "the kubeconfig context to use; empty: its current context")
}

// loadKubeconfig loads the file named by --kubeconfig, else the in-cluster
// config or $KUBECONFIG, with the context named by --context, else the
// current one.
func loadKubeconfig(path, context string) (*rest.Config, error) {
	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = path
	overrides := &clientcmd.ConfigOverrides{CurrentContext: context}
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, overrides).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("load kubeconfig: %w", err)
	}
	return cfg, nil
}

// bindZapFlags adds the logger's flags (--zap-log-level, ...) to fs.
func bindZapFlags(fs *pflag.FlagSet, opts *zap.Options) {
	gofs := flag.NewFlagSet("zap", flag.ContinueOnError)
	opts.BindFlags(gofs)
	fs.AddGoFlagSet(gofs)
}

// setErrorLogger is the logger of the commands a person runs, which have no
// logging flags: errors alone, one line each, on stderr.
func setErrorLogger() {
	ctrl.SetLogger(zap.New(zap.WriteTo(os.Stderr), zap.ConsoleEncoder(), zap.Level(zapcore.ErrorLevel),
		zap.StacktraceLevel(zapcore.PanicLevel)))
}

// setLogger makes the logger of opts everyone's, its WithValues deferred to
// the lines written (internal/lazylog: every reconcile adds values to a logger
// that almost never writes).
func setLogger(opts *zap.Options) {
	ctrl.SetLogger(lazylog.Wrap(zap.New(zap.UseFlagOptions(opts))))
}
