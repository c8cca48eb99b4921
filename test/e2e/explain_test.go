//go:build root && envtest

package e2e

import (
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/explain"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestExplain runs `vip-allocator explain` in the L2 lab from the client's
// namespace, with the agents' metrics served over TLS to authorized callers
// (the explain ServiceAccount's token, requested by explain itself): on a
// healthy Service every step is ✓ and every node's kernel holds the ready
// endpoint; an nftables element deleted by hand on the owner is ✗ on that
// node alone until the agent's drift repair puts it back; --what-if-drain
// names the node a real drain (cordon) then moves the address to; with the
// new owner's agent killed, explain shows the failover in the history, with
// its gap, and the dead agent as not alive; back on its first owner, the
// address goes where --what-if-drain says when that node gets the exclusion
// label.
func TestExplain(t *testing.T) {
	// A long resync, so the hand-deleted element stays gone long enough to be seen.
	d, _, vip, owner := announcedLab(t, "--metrics-bind-address", fmt.Sprintf(":%d", paasv1.AgentMetricsPort), "--resync-period", "15s")
	x := d.explainer(t)

	var r explain.Report
	testenv.Eventually(t, settle, "every step ✓", func() error {
		r = x.report(t, "svc/web")
		return allOK(r)
	})
	for _, n := range r.VIPs[0].DataPath.Nodes {
		if len(n.Ports) != 1 || !slices.Equal(n.Ports[0].Kernel, []string{"198.51.100.11:8080"}) {
			t.Fatalf("%s's kernel: %+v, want 80/TCP to 198.51.100.11:8080", n.Node, n.Ports)
		}
	}
	if e := r.VIPs[0].Election; e.Owner != owner {
		t.Fatalf("explain names owner %s, the LAN hears %s", e.Owner, owner)
	}
	if a := r.VIPs[0].Announcement; !slices.Equal(a.Answering, []string{owner}) || a.LastGratuitous == nil {
		t.Fatalf("announcement %+v: want %s alone answering, with its last gratuitous ARP", a, owner)
	}
	start := time.Now()
	healthy := x.text(t, "svc/web", "-n", "default")
	t.Logf("healthy (explain took %s, 3 agents asked):\n%s", time.Since(start).Round(time.Millisecond), healthy)

	// A Service naming a group that does not exist: ✗ at step 1, with the operator's reason.
	d.lanService(t, "shop", false, paasv1.IPGroupAnnotation, "shop")
	testenv.Eventually(t, settle, "shop pending", func() error {
		p := x.report(t, "svc/shop")
		if a := p.Allocation; a == nil || a.OK || !strings.Contains(a.Reason, paasv1.ReasonNoIPGroup) || len(a.Groups) != 1 || a.Groups[0].Admitted {
			return fmt.Errorf("allocation %+v: want ✗ %s, lan not admitting it", a, paasv1.ReasonNoIPGroup)
		}
		return nil
	})
	pending := x.kubectlVip(t, "explain", "svc/shop", "-n", "default")
	if !strings.Contains(pending, "✗ 1 allocation    pending: NoIPGroup") {
		t.Fatalf("kubectl vip explain svc/shop:\n%s\nwant ✗ at step 1", pending)
	}
	t.Logf("pending (kubectl vip):\n%s", pending)

	// An element deleted by hand on the owner: ✗ there, ✓ elsewhere; then repaired.
	d.in(owner, "nft", "delete", "element", "ip", "vip-allocator", endpointsMap(d, owner), "{ "+vip+" . 6 . 80 . 0 }")
	r = x.report(t, "svc/web")
	for _, n := range r.VIPs[0].DataPath.Nodes {
		if n.OK == (n.Node == owner) {
			t.Fatalf("after deleting %s's element: %s ok=%v (%s), want ✗ on %s alone", owner, n.Node, n.OK, n.Reason, owner)
		}
	}
	t.Logf("element deleted on %s:\n%s", owner, x.text(t, "ip", vip))
	testenv.Eventually(t, settle, "the drift repaired", func() error { return allOK(x.report(t, "svc/web")) })

	// The drain explain predicts is the one a cordon makes.
	r = x.report(t, "svc/web", "--what-if-drain", owner)
	moves := r.WhatIfDrain.Moves
	if len(moves) != 1 || moves[0].Address != vip || !slices.Equal(moves[0].From, []string{owner}) || len(moves[0].To) != 1 {
		t.Fatalf("--what-if-drain %s: %+v, want %s from %s to one node", owner, moves, vip, owner)
	}
	t.Logf("what if %s drains:\n%s", owner, x.text(t, "ipgroup", "lan", "--what-if-drain", owner))
	d.cordon(t, owner, true)
	moved := d.owner(t, vip, owner)
	if moved != moves[0].To[0] {
		t.Fatalf("cordoned %s: %s moved to %s, explain said %s", owner, vip, moved, moves[0].To[0])
	}

	// The new owner's agent killed: the failover, with its gap, in the history.
	killed := time.Now()
	_ = d.agents[moved].Process.Kill()
	_ = d.agents[moved].Wait()
	delete(d.agents, moved)
	d.untilAnnouncedElsewhere(t, vip, moved, killed)
	testenv.Eventually(t, settle, "the failover in explain's history", func() error {
		r = x.report(t, "svc/web")
		h := r.VIPs[0].History.Entries
		if len(h) == 0 || h[len(h)-1].From != moved || h[len(h)-1].Cause != paasv1.FailoverOwnerDead || h[len(h)-1].GapMilliseconds == nil {
			return fmt.Errorf("history %+v: want the last entry from %s, OwnerDead, with a gap", h, moved)
		}
		return nil
	})
	for _, c := range r.VIPs[0].Election.Nodes {
		if c.Node == moved && (c.Eligible || !strings.Contains(c.Reason, "not alive")) {
			t.Fatalf("%s after its agent was killed: %+v, want not alive", moved, c)
		}
	}
	t.Logf("%s's agent killed:\n%s", moved, x.text(t, "svc/web"))

	// The exclusion label is a drain too: back on the uncordoned owner, the
	// address goes where explain says a drain of it sends it.
	d.cordon(t, owner, false)
	d.waitAnnouncer(t, vip, owner)
	moves = x.report(t, "ip", vip, "--what-if-drain", owner).WhatIfDrain.Moves
	if len(moves) != 1 || len(moves[0].To) != 1 {
		t.Fatalf("--what-if-drain %s: %+v, want %s moved to one node", owner, moves, vip)
	}
	d.setNodeLabel(t, owner, corev1.LabelNodeExcludeBalancers, "true")
	if to := d.owner(t, vip, owner); to != moves[0].To[0] {
		t.Fatalf("%s labelled for exclusion: %s moved to %s, explain said %s", owner, vip, to, moves[0].To[0])
	}
}

// explainer runs explain in the client's namespace: the API server through
// a forwarder at the address the admin kubeconfig names, the agents on the LAN.
type explainer struct {
	d          *l2Lab
	kubeconfig string
	urls       string
}

func (d *l2Lab) explainer(t *testing.T) *explainer {
	kc, err := d.env.KubeconfigFile(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	api, err := url.Parse(d.env.AdminConfig.Host)
	if err != nil {
		t.Fatal(err)
	}
	d.forward("client", api.Host, api.Host)
	var urls []string
	for _, n := range []string{"node1", "node2", "node3"} {
		urls = append(urls, fmt.Sprintf("%s=https://%s:%d", n, lanIP[n], paasv1.AgentMetricsPort))
	}
	return &explainer{d: d, kubeconfig: kc, urls: strings.Join(urls, ",")}
}

func (x *explainer) run(t *testing.T, args ...string) string {
	t.Helper()
	cmd := append([]string{"netns", "exec", x.d.ns("client"), binary(x.d.root), "explain", "--kubeconfig", x.kubeconfig,
		"--agent-url", x.urls, "--agent-timeout", "3s"}, args...)
	out, err := exec.Command("ip", cmd...).Output()
	if err != nil {
		t.Fatalf("explain %s: %v", strings.Join(args, " "), err)
	}
	return string(out)
}

// kubectlVip runs the real kubectl with a kubectl-vip link to the binary on
// its PATH: the plugin as a person installs it.
func (x *explainer) kubectlVip(t *testing.T, args ...string) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Symlink(binary(x.d.root), filepath.Join(dir, "kubectl-vip")); err != nil {
		t.Fatal(err)
	}
	cmd := append([]string{"netns", "exec", x.d.ns("client"), "env", "PATH=" + dir + ":" + os.Getenv("PATH"),
		filepath.Join(x.d.root, "bin", "k8s", "kubectl"), "vip"}, args...)
	out, err := exec.Command("ip", append(cmd, "--kubeconfig", x.kubeconfig, "--agent-url", x.urls)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl vip %s: %v: %s", strings.Join(args, " "), err, out)
	}
	return string(out)
}

func (x *explainer) text(t *testing.T, args ...string) string { return x.run(t, args...) }

func (x *explainer) report(t *testing.T, args ...string) explain.Report {
	t.Helper()
	var r explain.Report
	if err := json.Unmarshal([]byte(x.run(t, append(args, "-o", "json")...)), &r); err != nil {
		t.Fatal(err)
	}
	return r
}

// allOK is nil when every step of every address is ✓ and every agent answered.
func allOK(r explain.Report) error {
	if r.Allocation == nil || !r.Allocation.OK || len(r.VIPs) == 0 || len(r.Problems) > 0 {
		return fmt.Errorf("allocation %+v, problems %v", r.Allocation, r.Problems)
	}
	for _, v := range r.VIPs {
		for name, c := range map[string]explain.Check{"ledger": v.Ledger.Check, "election": v.Election.Check,
			"data path": v.DataPath.Check, "announcement": v.Announcement.Check, "history": v.History.Check} {
			if !c.OK {
				return fmt.Errorf("%s %s: ✗ %s", v.Address, name, c.Reason)
			}
		}
	}
	return nil
}

// endpointsMap is the name of the map of one-endpoint Service ports node's
// nftables table uses now (endpoints_1_a or _b).
func endpointsMap(d *l2Lab, node string) string {
	table := d.in(node, "nft", "list", "table", "ip", "vip-allocator")
	i := strings.Index(table, "map endpoints_1_")
	if i < 0 {
		return "endpoints_1_a"
	}
	return strings.Fields(table[i:])[1]
}
