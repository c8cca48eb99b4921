//go:build root && envtest

package cluster

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/paas-org/vip-allocator-operator/explain"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// explainHealthy runs 'kubectl vip explain' as a person installs it (a
// kubectl-vip link to the binary on PATH), with only the cluster's
// kubeconfig: the agents' facts come through the API server's pods/proxy.
// It fails unless every agent answered and every node's kernel DNATs the
// Service's ports to the endpoints it should.
func (l *lab) explainHealthy(t *testing.T, ns, name string) {
	t.Helper()
	root := testenv.RepoRoot()
	dir := t.TempDir()
	if err := os.Symlink(filepath.Join(root, "bin", "vip-allocator"), filepath.Join(dir, "kubectl-vip")); err != nil {
		t.Fatal(err)
	}
	var r explain.Report
	testenv.Eventually(t, 60*time.Second, "explain svc/"+name+" through pods/proxy", func() error {
		// kubectl takes no flag before a plugin's name: the plugin reads --kubeconfig.
		cmd := exec.Command(filepath.Join(root, "bin", "k8s", "kubectl"), "vip", "explain", "svc/"+name, "-n", ns, "-o", "json",
			"--kubeconfig", l.kubeconfig)
		cmd.Env = append(os.Environ(), "PATH="+dir+":"+os.Getenv("PATH"))
		var stderr strings.Builder
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			return fmt.Errorf("kubectl vip explain: %v: %s%s", err, stderr.String(), out)
		}
		r = explain.Report{}
		if err := json.Unmarshal(out, &r); err != nil {
			return err
		}
		if len(r.Problems) > 0 || len(r.VIPs) == 0 {
			return fmt.Errorf("problems %v, %d addresses", r.Problems, len(r.VIPs))
		}
		for _, v := range r.VIPs {
			if !v.DataPath.OK || len(v.DataPath.Nodes) != len(l.nodeNetns) {
				return fmt.Errorf("%s: data path ✗ %s (%d nodes)", v.Address, v.DataPath.Reason, len(v.DataPath.Nodes))
			}
			for _, n := range v.DataPath.Nodes {
				for _, p := range n.Ports {
					if len(p.Kernel) == 0 {
						return fmt.Errorf("%s on %s: the kernel holds no endpoint of %s", v.Address, n.Node, p.Port)
					}
				}
			}
		}
		return nil
	})
	t.Logf("explain through pods/proxy: %s, data path %s", r.VIPs[0].Address, strings.TrimSpace(r.VIPs[0].DataPath.Reason))
}
