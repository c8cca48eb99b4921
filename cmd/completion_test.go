package cmd

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bashCompletionLib is the bash-completion package's library, which the
// completion script calls for the words of the line (_get_comp_words_by_ref).
const bashCompletionLib = "/usr/share/bash-completion/bash_completion"

// completer runs the completion of the shells and of kubectl against the
// test binary linked as vip-allocator, kubectl-vip and kubectl_complete-vip.
type completer struct {
	dir, script string
	env         []string
}

func newCompleter(t *testing.T, env ...string) *completer {
	t.Helper()
	if _, err := exec.LookPath("bash"); err != nil {
		t.Fatal("no bash:", err)
	}
	if _, err := os.Stat(bashCompletionLib); err != nil {
		t.Fatalf("%s is missing: install the bash-completion package", bashCompletionLib)
	}
	dir := t.TempDir()
	binaryAs(t, dir, Name, PluginName, PluginCompletionName)
	script, stderr, code := run(t, filepath.Join(dir, Name), env, "completion", "bash")
	if code != 0 {
		t.Fatalf("completion bash: exit code %d: %s", code, stderr)
	}
	path := filepath.Join(dir, "vip-allocator.bash")
	if err := os.WriteFile(path, []byte(script), 0o644); err != nil {
		t.Fatal(err)
	}
	return &completer{dir: dir, script: path, env: append(env, testMainEnv+"=1", "PATH="+dir+":"+os.Getenv("PATH"))}
}

// bash completes line, typed up to its end, as bash does on TAB with the
// script "vip-allocator completion bash" prints.
func (c *completer) bash(t *testing.T, line string) []string {
	t.Helper()
	return c.bashWith(t, c.script, line)
}

// bashWith completes line as bash does on TAB with script sourced: the words
// in COMP_WORDS, the last one's index in COMP_CWORD, and the function the
// script registered for the line's program; it returns the words offered
// (COMPREPLY, without their descriptions).
func (c *completer) bashWith(t *testing.T, script, line string) []string {
	t.Helper()
	// compopt works only while readline runs a completion: here it is
	// recorded, not applied.
	sh := `source ` + bashCompletionLib + `
source "$SCRIPT"
compopt() { echo "$*" >>"$COMPOPT_LOG"; }
COMP_LINE=$LINE
COMP_POINT=${#COMP_LINE}
read -ra COMP_WORDS <<<"$LINE"
[[ $LINE == *" " ]] && COMP_WORDS+=("")
COMP_CWORD=$((${#COMP_WORDS[@]} - 1))
COMP_TYPE=9
complete -p "${COMP_WORDS[0]}" >/dev/null || exit 3
"__start_${COMP_WORDS[0]}" "${COMP_WORDS[0]}" "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD-1]}"
printf '%s\n' "${COMPREPLY[@]}"
`
	cmd := exec.Command("bash", "--norc", "--noprofile", "-c", sh)
	cmd.Env = append(append(os.Environ(), c.env...), "SCRIPT="+script, "LINE="+line, "COLUMNS=200",
		"COMPOPT_LOG="+filepath.Join(t.TempDir(), "compopt"))
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil || stderr.Len() > 0 {
		t.Fatalf("bash completion of %q: %v: %s", line, err, stderr.String())
	}
	var words []string
	for _, l := range strings.Split(string(out), "\n") {
		if f := strings.Fields(l); len(f) > 0 {
			words = append(words, f[0])
		}
	}
	return words
}

// plugin runs kubectl_complete-vip as kubectl runs it to complete "kubectl vip
// WORDS...": with the words after vip, the last one the word to complete.
func (c *completer) plugin(t *testing.T, words ...string) []string {
	t.Helper()
	cmd := exec.Command(filepath.Join(c.dir, PluginCompletionName), words...)
	cmd.Env = append(os.Environ(), c.env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("%s %s: %v", PluginCompletionName, strings.Join(words, " "), err)
	}
	return completions(t, string(out))
}

// completions reads cobra's completion protocol: a word a line (a tab before
// its description), then ":DIRECTIVE".
func completions(t *testing.T, out string) []string {
	t.Helper()
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) == 0 || !strings.HasPrefix(lines[len(lines)-1], ":") {
		t.Fatalf("completion output %q ends with no directive", out)
	}
	var words []string
	for _, l := range lines[:len(lines)-1] {
		w, _, _ := strings.Cut(l, "\t")
		if !strings.HasPrefix(w, "_activeHelp_") {
			words = append(words, w)
		}
	}
	return words
}

func wantWords(t *testing.T, what string, got, want []string) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("%s: %q, want %q", what, got, want)
	}
}

// TestBashCompletion: bash, with the script "vip-allocator completion bash"
// prints, completes the commands, the flags and the values of the flags.
func TestBashCompletion(t *testing.T) {
	c := newCompleter(t, "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
	for _, tt := range []struct {
		line string
		want []string
	}{
		{"vip-allocator ", []string{"agent", "completion", "explain", "help", "migrate", "operator", "version"}},
		{"vip-allocator op", []string{"operator"}},
		{"vip-allocator agent cl", []string{"cleanup"}},
		{"vip-allocator migrate ", []string{"all", "metallb", "plan", "upgrade"}},
		{"vip-allocator migrate metallb ", []string{"apply", "plan"}},
		{"vip-allocator operator --leader-el", []string{"--leader-elect", "--leader-election-namespace"}},
		{"vip-allocator agent --datap", []string{"--dataplane"}},
		{"vip-allocator agent --dataplane ", []string{"auto", "nftables", "iptables"}},
		{"vip-allocator agent --on-cordon=", []string{"handover", "keep"}},
		{"vip-allocator operator --ip-mode ", []string{"Proxy", "VIP"}},
		{"vip-allocator explain -o ", []string{"json", "yaml"}},
		{"vip-allocator explain --what-if", []string{"--what-if-drain"}},
		{"vip-allocator explain ", []string{"svc/", "ip", "ipgroup", "node"}},
		{"vip-allocator explain ip", []string{"ip", "ipgroup"}},
		{"vip-allocator version -o ", []string{"json", "yaml"}},
		{"vip-allocator completion ", []string{"bash", "zsh", "fish", "powershell"}},
		{"vip-allocator completion f", []string{"fish"}},
	} {
		wantWords(t, tt.line, c.bash(t, tt.line), tt.want)
	}
}

// TestKubectlPluginCompletion: kubectl completes "kubectl vip" by running
// kubectl_complete-vip, a link to the binary, with the words after "vip";
// with the real kubectl when bin/k8s holds one.
func TestKubectlPluginCompletion(t *testing.T) {
	c := newCompleter(t, "KUBECONFIG="+filepath.Join(t.TempDir(), "none"))
	wantWords(t, "kubectl vip ex", c.plugin(t, "ex"), []string{"explain"})
	wantWords(t, "kubectl vip explain -o ", c.plugin(t, "explain", "-o", ""), []string{"json", "yaml"})
	wantWords(t, "kubectl vip migrate metallb ", c.plugin(t, "migrate", "metallb", ""), []string{"apply", "plan"})
	wantWords(t, "kubectl vip explain --agent-t", c.plugin(t, "explain", "--agent-t"), []string{"--agent-timeout", "--agent-token"})

	kubectl := c.linkKubectl(t)
	wantWords(t, "kubectl vip ex (kubectl)", c.kubectl(t, kubectl, "vip", "ex"), []string{"explain"})
	wantWords(t, "kubectl vip explain -o (kubectl)", c.kubectl(t, kubectl, "vip", "explain", "-o", ""), []string{"json", "yaml"})
	wantWords(t, "kubectl vip explain --what (kubectl's bash)", c.kubectlBash(t, "kubectl vip explain --what"), []string{"--what-if-drain"})
	wantWords(t, "kubectl vip migrate metallb (kubectl's bash)", c.kubectlBash(t, "kubectl vip migrate metallb "), []string{"apply", "plan"})
}

// linkKubectl links a real kubectl (bin/k8s's, else the PATH's) into the
// completer's directory, first on its PATH; without one the test is skipped.
func (c *completer) linkKubectl(t *testing.T) string {
	t.Helper()
	kubectl := filepath.Join(repoRoot(), "bin", "k8s", "kubectl")
	if _, err := os.Stat(kubectl); err != nil {
		if kubectl, err = exec.LookPath("kubectl"); err != nil {
			t.Skip("no kubectl in bin/k8s (make controlplane builds it) or on the PATH")
		}
	}
	if err := os.Symlink(kubectl, filepath.Join(c.dir, "kubectl")); err != nil {
		t.Fatal(err)
	}
	return filepath.Join(c.dir, "kubectl")
}

// kubectlBash completes line with kubectl's own bash completion script, as
// a person who sourced "kubectl completion bash" does.
func (c *completer) kubectlBash(t *testing.T, line string) []string {
	t.Helper()
	cmd := exec.Command(filepath.Join(c.dir, "kubectl"), "completion", "bash")
	cmd.Env = append(os.Environ(), c.env...)
	script, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl completion bash: %v", err)
	}
	path := filepath.Join(t.TempDir(), "kubectl.bash")
	if err := os.WriteFile(path, script, 0o644); err != nil {
		t.Fatal(err)
	}
	return c.bashWith(t, path, line)
}

// kubectl runs the real kubectl's completion (what its completion script asks) of words.
func (c *completer) kubectl(t *testing.T, kubectl string, words ...string) []string {
	t.Helper()
	cmd := exec.Command(kubectl, append([]string{"__complete"}, words...)...)
	cmd.Env = append(os.Environ(), c.env...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("kubectl __complete %s: %v", strings.Join(words, " "), err)
	}
	return completions(t, string(out))
}

// repoRoot is the repository's root, above this package.
func repoRoot() string {
	wd, err := os.Getwd()
	if err != nil {
		panic(err)
	}
	return filepath.Dir(wd)
}
