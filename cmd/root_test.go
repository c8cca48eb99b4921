package cmd

import (
	"bytes"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/cobra"
)

// testMainEnv makes the test binary the vip-allocator binary: exec'd with it
// set, it runs Main with its own name and arguments, so tests see real exit
// codes, stderr, and names like kubectl_complete-vip.
const testMainEnv = "VIP_ALLOCATOR_TEST_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(testMainEnv) == "1" {
		os.Exit(Main(os.Args[0], os.Args[1:]))
	}
	os.Exit(m.Run())
}

// binaryAs links the test binary into a new directory under name, for exec.
func binaryAs(t *testing.T, dir string, names ...string) {
	t.Helper()
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range names {
		if err := os.Symlink(self, filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
}

// run execs the binary at path with args and env, and returns its stdout,
// stderr and exit code.
func run(t *testing.T, path string, env []string, args ...string) (stdout, stderr string, code int) {
	t.Helper()
	c := exec.Command(path, args...)
	c.Env = append(append(os.Environ(), testMainEnv+"=1", "KUBECONFIG="+filepath.Join(t.TempDir(), "none")), env...)
	var out, errOut bytes.Buffer
	c.Stdout, c.Stderr = &out, &errOut
	err := c.Run()
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		code = exit.ExitCode()
	case err != nil:
		t.Fatal(err)
	}
	return out.String(), errOut.String(), code
}

// commands is every command of the tree a person runs (not the hidden ones).
func commands(root *cobra.Command) []*cobra.Command {
	out := []*cobra.Command{root}
	for _, c := range root.Commands() {
		if !c.Hidden {
			out = append(out, commands(c)...)
		}
	}
	return out
}

// TestEveryCommandHasAnExample: every command's --help shows examples, each
// a command line of the program as it was run (vip-allocator, or kubectl vip
// for the plugin).
func TestEveryCommandHasAnExample(t *testing.T) {
	want := []string{"operator", "agent", "agent cleanup", "migrate", "migrate plan", "migrate all", "migrate upgrade",
		"migrate metallb", "migrate metallb plan", "migrate metallb apply", "explain", "version", "completion", "help"}
	for program, prefix := range map[string]string{"/usr/local/bin/vip-allocator": "vip-allocator ", "/home/me/bin/kubectl-vip": "kubectl vip "} {
		seen := map[string]bool{}
		for _, c := range commands(NewRoot(program)) {
			path := strings.TrimSpace(strings.TrimPrefix(c.CommandPath(), c.Root().DisplayName()))
			seen[path] = true
			root := NewRoot(program)
			var out bytes.Buffer
			root.SetOut(&out)
			root.SetArgs(append(strings.Fields(path), "--help"))
			if err := root.Execute(); err != nil {
				t.Errorf("%s --help: %v", path, err)
				continue
			}
			_, ex, ok := strings.Cut(out.String(), "Examples:\n")
			if !ok {
				t.Errorf("%s %s --help shows no example:\n%s", program, path, out.String())
				continue
			}
			for _, line := range strings.Split(ex, "\n") {
				line = strings.TrimSpace(line)
				if line == "" {
					break
				}
				if !strings.HasPrefix(line, "#") && !strings.HasPrefix(line, prefix) && !strings.HasPrefix(line, "ln -s") {
					t.Errorf("%s --help: example %q does not run %q", path, line, prefix)
				}
			}
		}
		for _, w := range want {
			if !seen[w] {
				t.Errorf("no command %q", w)
			}
		}
	}
}

// TestBadInput: input a command refuses ends it with a message that says what is
// wrong and exit code 2, before it reads any kubeconfig, and never with a stack trace.
func TestBadInput(t *testing.T) {
	dir := t.TempDir()
	binaryAs(t, dir, Name)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{nil, "name a command: agent, completion, explain, migrate, operator, version"},
		{[]string{"frobnicate"}, `unknown command "frobnicate"`},
		{[]string{"operatr"}, `did you mean "operator"?`},
		{[]string{"operator", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"operator", "--workers=many"}, `invalid argument "many" for "--workers" flag`},
		{[]string{"operator", "--ip-mode=Direct"}, `--ip-mode must be Proxy or VIP, not "Direct"`},
		{[]string{"operator", "--service-cidrs=10.0.0.0/33"}, `--service-cidrs: "10.0.0.0/33" is not a CIDR`},
		{[]string{"operator", "--agent-args=--dataplane"}, "--agent-args: flag needs an argument: --dataplane"},
		{[]string{"operator", "--agent-tolerations={"}, "--agent-tolerations:"},
		{[]string{"operator", "--released-address-grace=-1s"}, "--released-address-grace must not be negative"},
		{[]string{"operator", "now"}, `unexpected argument "now"`},
		{[]string{"agent"}, "--node-name is required"},
		{[]string{"agent", "--node-name=node1", "--on-cordon=never"}, "--on-cordon"},
		{[]string{"agent", "--node-name=node1", "--failover-history=0"}, "--failover-history 0: want 1 to"},
		{[]string{"agent", "--node-name"}, "flag needs an argument: --node-name"},
		{[]string{"agent", "clean"}, `unexpected argument "clean"`},
		{[]string{"agent", "cleanup", "now"}, `unexpected argument "now"`},
		{[]string{"migrate"}, "name a command: all, metallb, plan, upgrade"},
		{[]string{"migrate", "plans"}, `did you mean "plan"?`},
		{[]string{"migrate", "plan", "--migration-cutover-delay=soon"}, `invalid argument "soon"`},
		{[]string{"migrate", "metallb"}, "name a command: apply, plan"},
		{[]string{"migrate", "metallb", "apply", "--scale-down-controller=maybe"}, `invalid argument "maybe"`},
		{[]string{"explain"}, "accepts between 1 and 2 arg(s), received 0"},
		{[]string{"explain", "pod/web"}, `cannot explain a "pod": want svc, ip, ipgroup or node`},
		{[]string{"explain", "ip", "300.1.2.3"}, `ip "300.1.2.3"`},
		{[]string{"explain", "svc/"}, "name what to explain"},
		{[]string{"explain", "svc/web", "web"}, "either as KIND/NAME or as KIND NAME"},
		{[]string{"explain", "svc/web", "-o", "table"}, `-o "table": want json or yaml`},
		{[]string{"explain", "svc/web", "--agent-timeout=5"}, `invalid argument "5" for "--agent-timeout"`},
		{[]string{"version", "-o", "xml"}, `-o "xml": want json or yaml`},
		{[]string{"completion"}, "accepts 1 arg(s), received 0"},
		{[]string{"completion", "tcsh"}, `invalid argument "tcsh"`},
	} {
		stdout, stderr, code := run(t, filepath.Join(dir, Name), nil, tt.args...)
		name := strings.Join(append([]string{Name}, tt.args...), " ")
		if code != ExitUsage {
			t.Errorf("%s: exit code %d, want %d (stderr %q)", name, code, ExitUsage, stderr)
		}
		if !strings.Contains(stderr, tt.want) {
			t.Errorf("%s: stderr %q, want it to say %q", name, stderr, tt.want)
		}
		if !strings.Contains(stderr, "--help' for usage") {
			t.Errorf("%s: stderr %q does not say where the usage is", name, stderr)
		}
		if strings.Contains(stderr, "goroutine ") || strings.Contains(stderr, "panic") || stdout != "" {
			t.Errorf("%s: stdout %q, stderr %q: want a message alone", name, stdout, stderr)
		}
	}
}

// TestHelpAndVersionExitZero: asking for help or the version is no error.
func TestHelpAndVersionExitZero(t *testing.T) {
	dir := t.TempDir()
	binaryAs(t, dir, Name)
	for _, args := range [][]string{{"help"}, {"--help"}, {"-h"}, {"operator", "-h"}, {"agent", "cleanup", "--help"},
		{"help", "migrate", "plan"}, {"version"}, {"version", "-o", "json"}, {"completion", "bash"}, {"completion", "zsh"},
		{"completion", "fish"}, {"completion", "powershell"}, {"completion", "bash", "--no-descriptions"}} {
		stdout, stderr, code := run(t, filepath.Join(dir, Name), nil, args...)
		if code != 0 || stdout == "" {
			t.Errorf("%s %s: exit code %d, stdout %q, stderr %q; want 0 and output", Name, strings.Join(args, " "), code, stdout, stderr)
		}
	}
}

// TestSingleDashLongFlags: the long flags keep the single dash the
// standard library's flag package took, for the command they are given to;
// shorthands and values are left as they are.
func TestSingleDashLongFlags(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"operator -leader-elect=false -kubeconfig k", "operator --leader-elect=false --kubeconfig k"},
		{"agent -node-name n1 -n ns -dataplane=nftables", "agent --node-name n1 -n ns --dataplane=nftables"},
		{"agent cleanup -h", "agent cleanup -h"},
		{"agent cleanup -help", "agent cleanup --help"},
		{"explain svc/web -ojson -context prod", "explain svc/web -ojson --context prod"},
		{"migrate plan -no-such-flag -- -namespace", "migrate plan -no-such-flag -- -namespace"},
	} {
		got := strings.Join(goStyleLongFlags(NewRoot(Name), strings.Fields(tt.in)), " ")
		if got != tt.want {
			t.Errorf("%q: %q, want %q", tt.in, got, tt.want)
		}
	}
}
