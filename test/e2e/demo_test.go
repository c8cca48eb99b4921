//go:build root && envtest

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
// checks its output for what it promises: the allocated IP, the router's
// answer to the probe of it (web moves on, the client's entry for the router
// stays), the ARP owner, the curl answer through the VIP, and the failover
// line.
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
		`IP 192\.0\.2\.1: InUseOnLAN=True reason=ProbeAnswered\nmessage: [0-9a-f:]+ answered the ARP probe node node\d sent on eth0 for 192\.0\.2\.1`,
		`Warning\s+AddressInUseOnLAN\s+Changed 192\.0\.2\.1 → 192\.0\.2\.2 \(IPGroup 192\.0\.2\.0-24\): 192\.0\.2\.1 is in use on the LAN by the host with MAC`,
		`service/web\s+LoadBalancer\s+\S+\s+192\.0\.2\.2\s`,
		`reply from 192\.0\.2\.2 \[[0-9A-Fa-f:]+\]\s+→ (node\d), the owner the ledger names: (node\d)`,
		`hello from the backend pod behind the VIP`,
		`failover: 192\.0\.2\.2 is answered by node\d after \d+ ms`,
		`curl http://192\.0\.2\.2/ → hello from the backend pod behind the VIP`,
		`same connection, before the move: hello from the backend pod behind the VIP`,
		`(node\d) took 192\.0\.2\.2 over from node\d`,
		`same connection, after the move: hello from the backend pod behind the VIP`,
	} {
		if !regexp.MustCompile(want).Match(out) {
			t.Errorf("demo output lacks %q", want)
		}
	}
	if m := regexp.MustCompile(`→ (node\d), the owner the ledger names: (node\d)`).FindSubmatch(out); m != nil && string(m[1]) != string(m[2]) {
		t.Errorf("ARP answered by %s but the ledger names %s", m[1], m[2])
	}
	// The MAC that answered the probe, the one the Service's Event names and
	// the client's entry for 192.0.2.1 are all the router's.
	router := regexp.MustCompile(`the router's MAC: ([0-9a-f:]+)`).FindSubmatch(out)
	for _, re := range []string{`message: ([0-9a-f:]+) answered the ARP probe`, `by the host with MAC ([0-9a-f:]+)`, `neighbour entry for 192\.0\.2\.1: lladdr ([0-9a-f:]+)`} {
		if m := regexp.MustCompile(re).FindSubmatch(out); router == nil || m == nil || string(m[1]) != string(router[1]) {
			t.Errorf("%s: %q, want the router's MAC %q", re, m, router)
		}
	}
	if t.Failed() {
		t.Logf("demo output:\n%s", out)
	}
}
