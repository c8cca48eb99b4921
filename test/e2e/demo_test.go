package e2e

import (
	"fmt"
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
	// Fixed ports below the kernel's ephemeral range (32768-60999): a port the kernel
	// says is free now can be handed to a client socket of another package's test
	// (they run in parallel) before etcd binds it, and etcd also takes ETCD_PORT+1.
	// The benches' control planes use 17443/13379, 17543/13479 and 17643/13579.
	api, etcd := 18443, 14379
	c := exec.Command(filepath.Join(root, "hack", "demo.sh"))
	c.Env = append(os.Environ(), fmt.Sprintf("API_PORT=%d", api), fmt.Sprintf("ETCD_PORT=%d", etcd))
	out, err := c.CombinedOutput()
	if err != nil {
		t.Fatalf("hack/demo.sh: %v\n%s", err, out)
	}
	for _, want := range []string{
		`service/web\s+LoadBalancer\s+\S+\s+192\.0\.2\.1\s`,
		`service/wrong\s+LoadBalancer\s+\S+\s+<pending>`,
		`reason=RequestedIPExcluded`,
		`vip\.paas\.org/IPAllocated=False reason=RequestedIPReserved\nmessage: requested 192\.0\.2\.251 is the address of Node node1, reserved in the cluster and never handed out`,
		`service/node-ip\s+LoadBalancer\s+\S+\s+<pending>`,
		`reply from 192\.0\.2\.1 \[[0-9A-Fa-f:]+\]\s+→ (node\d), the owner the ledger names: (node\d)`,
		`hello from the backend pod behind the VIP`,
		`failover: 192\.0\.2\.1 is answered by node\d after \d+ ms`,
		`curl http://192\.0\.2\.1/ → hello from the backend pod behind the VIP`,
		`same connection, before the move: hello from the backend pod behind the VIP`,
		`(node\d) took 192\.0\.2\.1 over from node\d`,
		`same connection, after the move: hello from the backend pod behind the VIP`,
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
