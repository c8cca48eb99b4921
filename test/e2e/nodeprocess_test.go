//go:build root && envtest

package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// nodeProcess is a program the test runs in a lab node's namespace, as a DaemonSet's pod with
// host networking runs on a node, its output in a log file of the test's.
type nodeProcess struct {
	what, node string
	cmd        *exec.Cmd
	log        string
	done       chan error // receives the process's end once, then holds it
}

// startInNode runs args in node's namespace with env added to the test's environment; what
// names the program in failures. The process dies with the test process, and is stopped when
// the test ends.
func startInNode(t testing.TB, d *dataLab, node, what string, env []string, args ...string) *nodeProcess {
	t.Helper()
	p := &nodeProcess{what: what, node: node, done: make(chan error, 1),
		log: filepath.Join(t.TempDir(), node+"-"+filepath.Base(args[0])+".log")}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close() // the child holds its own descriptor
	p.cmd = exec.Command("ip", append([]string{"netns", "exec", d.ns(node)}, args...)...)
	p.cmd.Env = append(os.Environ(), env...)
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := p.cmd.Start(); err != nil {
		t.Fatalf("start %s on %s: %v", what, node, err)
	}
	go func() { p.done <- p.cmd.Wait() }()
	t.Cleanup(p.stop)
	return p
}

// exited is nil while the process runs, else says that it ended and how.
func (p *nodeProcess) exited() error {
	select {
	case err := <-p.done:
		p.done <- err
		return fmt.Errorf("%s on %s exited (%v)", p.what, p.node, err)
	default:
		return nil
	}
}

func (p *nodeProcess) signal(sig os.Signal) {
	if p.exited() == nil {
		_ = p.cmd.Process.Signal(sig)
	}
}

// stop ends the process: SIGTERM, SIGKILL after 10 s. Later calls do nothing.
func (p *nodeProcess) stop() {
	p.signal(syscall.SIGTERM)
	var err error
	select {
	case err = <-p.done:
	case <-time.After(10 * time.Second):
		_ = p.cmd.Process.Kill()
		err = <-p.done
	}
	p.done <- err
}

// tail is the end of the log, at most n lines, headed by whose it is.
func (p *nodeProcess) tail(n int) string {
	out, _ := os.ReadFile(p.log)
	lines := strings.Count(strings.TrimRight(string(out), "\n"), "\n") + 1
	return fmt.Sprintf("%s on %s, the last %d of %d log lines:\n%s", p.what, p.node,
		min(lines, n), lines, testenv.Tail(string(out), n))
}
