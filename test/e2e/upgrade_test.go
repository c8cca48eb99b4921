//go:build root && envtest

package e2e

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// beforeNodeViews is the last commit whose agents watch every Node rather
// than read NodeViews: the agents a rolling upgrade to NodeViews starts from.
const beforeNodeViews = "337a4de"

// TestRollingUpgradeToNodeViews runs the L2 lab half-way through an agent
// upgrade: node1 and node2 run the agent of beforeNodeViews, which reads
// every Node, node3 this build, which reads NodeViews: the operator publishes
// those of the old agents' nodes (before it does, node3 reads their Nodes).
// Every VIP must have exactly one owner that all
// three agree on (a disagreement answers ARP twice, or not at all), also
// after a cordon of a node of either version, and after an old agent is
// upgraded.
func TestRollingUpgradeToNodeViews(t *testing.T) {
	d := setupL2(t)
	d.binaries = map[string]string{"node1": oldAgent(t, d.root), "node2": oldAgent(t, d.root)}
	for _, n := range []string{"node1", "node2", "node3"} {
		d.startAgent(t, n)
	}
	ctx := context.Background()
	if err := d.env.Admin.Create(ctx, &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"},
		Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24", ExcludedIPs: []string{"192.0.2.0/27", "192.0.2.255"}}}); err != nil {
		t.Fatal(err)
	}
	var vips []string
	for i := range 6 {
		vips = append(vips, d.vipOf(t, d.lanService(t, fmt.Sprintf("web-%d", i), false)))
	}
	// owners waits until every VIP is answered by exactly the one node the
	// ledger names, and none by not.
	owners := func(not string) map[string][]string {
		by := map[string][]string{}
		for _, vip := range vips {
			o := d.owner(t, vip, not)
			by[o] = append(by[o], vip)
		}
		return by
	}
	by := owners("")
	t.Logf("mixed versions: VIPs by owner %v", by)
	if len(by) < 2 {
		t.Fatalf("6 VIPs all went to %v: the agents do not see each other's nodes", by)
	}
	d.viewShows(t, "node3", "published", func(*paasv1.NodeView) bool { return true })
	for _, old := range []string{"node1", "node2"} { // their agents publish none
		d.viewShows(t, old, "published by the operator", func(*paasv1.NodeView) bool { return true })
	}

	t.Run("cordoning the new agent's node moves its VIPs, as the old agents read its Node", func(t *testing.T) {
		d.cordon(t, "node3", true)
		d.viewShows(t, "node3", "cordoned", func(v *paasv1.NodeView) bool { return v.Spec.Unschedulable })
		owners("node3")
		d.cordon(t, "node3", false)
		owners("")
	})

	t.Run("cordoning an old agent's node moves its VIPs, as the new agent reads the view the operator publishes of it", func(t *testing.T) {
		d.cordon(t, "node1", true)
		d.viewShows(t, "node1", "cordoned", func(v *paasv1.NodeView) bool { return v.Spec.Unschedulable })
		owners("node1")
		d.cordon(t, "node1", false)
		owners("")
	})

	t.Run("node1 upgraded: its view is kept and every VIP keeps one owner", func(t *testing.T) {
		d.stopAgent("node1")
		delete(d.binaries, "node1")
		d.startAgent(t, "node1")
		d.viewShows(t, "node1", "published", func(*paasv1.NodeView) bool { return true })
		t.Logf("node1 upgraded: VIPs by owner %v", owners(""))
	})
}

// oldAgent builds the vip-allocator of beforeNodeViews once into bin/ (from
// the repository's history, with git archive) and returns its path.
func oldAgent(t testing.TB, root string) string {
	t.Helper()
	out := filepath.Join(root, "bin", "vip-allocator-"+beforeNodeViews)
	if _, err := os.Stat(out); err == nil {
		return out
	}
	// A shallow clone lacks the commit: fetch it from where the clone came.
	if exec.Command("git", "-C", root, "cat-file", "-e", beforeNodeViews+"^{commit}").Run() != nil {
		if b, err := exec.Command("git", "-C", root, "fetch", "--quiet", "--unshallow").CombinedOutput(); err != nil {
			t.Logf("git fetch --unshallow: %v: %s", err, b)
		}
	}
	src := t.TempDir()
	archive := exec.Command("sh", "-c", "git -C \"$1\" archive \"$2\" | tar -x -C \"$3\"", "sh", root, beforeNodeViews, src)
	if b, err := archive.CombinedOutput(); err != nil {
		t.Fatalf("the agent before NodeViews (%s) from git history: %v: %s", beforeNodeViews, err, b)
	}
	build := exec.Command("go", "build", "-o", out+".tmp", ".")
	build.Dir = src
	if b, err := build.CombinedOutput(); err != nil {
		t.Fatalf("build the agent of %s: %v: %s", beforeNodeViews, err, b)
	}
	if err := os.Rename(out+".tmp", out); err != nil {
		t.Fatal(err)
	}
	return out
}
