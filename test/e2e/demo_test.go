package e2e

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"testing"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestDemo runs hack/demo.sh (what make demo runs) non-interactively and
// checks its output for what it promises: the allocated IP, the ARP owner, the
// curl answer through the VIP, and the failover line.
func TestDemo(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Fatal("the demo builds network namespaces and needs root")
	}
	root := testenv.RepoRoot()
	port := 20000 + rand.IntN(20000)
	c := exec.Command(filepath.Join(root, "hack", "demo.sh"))
	c.Env = append(os.Environ(), fmt.Sprintf("API_PORT=%d", port), fmt.Sprintf("ETCD_PORT=%d", port+2))
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/demo.sh: %v\n%s", err, out)
	}
	for _, want := range []string{
		`service/web\s+LoadBalancer\s+\S+\s+192\.0\.2\.1\s`,
		`service/wrong\s+LoadBalancer\s+\S+\s+<pending>`,
		`reason=RequestedIPExcluded`,
		`reply from 192\.0\.2\.1 \[[0-9A-Fa-f:]+\]\s+→ (node\d), the owner the ledger names: (node\d)`,
		`hello from the backend pod behind the VIP`,
		`failover: 192\.0\.2\.1 is answered by node\d after \d+ ms`,
		`curl http://192\.0\.2\.1/ → hello from the backend pod behind the VIP`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`→ (node\d), the owner the ledger names: (node\d)`).FindSubmatch(out); m != nil && string(m[1]) != string(m[2]) {
		t.Errorf("ARP answered by %s but the ledger names %s", m[1], m[2])
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", out)
	}
}
