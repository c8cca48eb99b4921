//go:build root && envtest

package e2e

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// TestGossipKeyRotation rotates the agents' gossip key in the L2 lab the way
// docs/operations.md tells an admin to (three edits of the Secret, each
// waited for on every agent's metrics) while a VIP is owned, and checks all
// along that every agent sees the three alive and one node answers ARP.
func TestGossipKeyRotation(t *testing.T) {
	d, _, vip, owner := announcedLab(t, "--gossip-key-poll", "1s", "--metrics-bind-address", "127.0.0.1:19478", "--metrics-secure=false")
	ctx := context.Background()

	var secret corev1.Secret
	key := client.ObjectKey{Namespace: paasv1.DefaultNamespace, Name: paasv1.MemberlistSecret}
	if err := d.env.Admin.Get(ctx, key, &secret); err != nil {
		t.Fatal(err)
	}
	oldKey := secret.Data[paasv1.MemberlistKey]
	newKey := make([]byte, 32)
	_, _ = rand.Read(newKey)

	stop := make(chan struct{})
	problems := make(chan string, 100)
	samples := make(chan int, 1)
	go func() {
		n := 0
		defer func() { samples <- n }()
		for {
			select {
			case <-stop:
				return
			default:
			}
			n++
			for _, node := range []string{"node1", "node2", "node3"} {
				if alive := d.agentMetric(node, "vip_allocator_agent_agents_alive"); alive != "3" {
					problems <- fmt.Sprintf("%s sees %s agents alive", node, alive)
				}
			}
			if macs := d.arpAnswersOnce(vip); len(macs) != 1 {
				problems <- fmt.Sprintf("ARP for %s answered by %v", vip, macs)
			}
		}
	}()
	for _, step := range [][][]byte{{oldKey, newKey}, {newKey, oldKey}, {newKey}} {
		var lines []string
		for _, k := range step {
			lines = append(lines, base64.StdEncoding.EncodeToString(k))
		}
		if err := d.env.Admin.Get(ctx, key, &secret); err != nil {
			t.Fatal(err)
		}
		secret.Data[paasv1.MemberlistKeys] = []byte(strings.Join(lines, "\n"))
		if err := d.env.Admin.Update(ctx, &secret); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, settle, fmt.Sprintf("every agent shows the keys %d", len(step)), func() error {
			for _, node := range []string{"node1", "node2", "node3"} {
				if got, want := d.gossipKeys(node), fingerprints(step); !slices.Equal(got, want) {
					return fmt.Errorf("%s has keys %v, want %v", node, got, want)
				}
			}
			return nil
		})
		time.Sleep(2 * time.Second) // gossip and probe rounds on this step's keys
	}
	close(stop)
	n := <-samples
	close(problems)
	var seen []string
	for p := range problems {
		seen = append(seen, p)
	}
	if len(seen) > 0 {
		t.Errorf("during the rotation (%d samples): %v", n, seen)
	}
	if n < 5 {
		t.Errorf("only %d samples during the rotation", n)
	}
	if now := d.owner(t, vip, ""); now != owner {
		t.Errorf("the rotation moved %s from %s to %s", vip, owner, now)
	}
}

// gossipKeys reads node's agent's installed gossip keys, primary first.
func (d *l2Lab) gossipKeys(node string) []string {
	var primary, others []string
	for _, line := range d.agentMetrics(node) {
		rest, ok := strings.CutPrefix(line, `vip_allocator_agent_gossip_keys{fingerprint="`)
		if !ok {
			continue
		}
		fp, labels, _ := strings.Cut(rest, `"`)
		if strings.Contains(labels, `primary="true"`) {
			primary = append(primary, fp)
		} else {
			others = append(others, fp)
		}
	}
	slices.Sort(others)
	return append(primary, others...)
}

// fingerprints names keys as the metric does, primary first, the rest sorted.
func fingerprints(keys [][]byte) []string {
	var others []string
	for _, k := range keys[1:] {
		others = append(others, membership.Fingerprint(k))
	}
	slices.Sort(others)
	return append([]string{membership.Fingerprint(keys[0])}, others...)
}

// arpAnswersOnce sends one ARP request for vip from the client and returns
// the distinct MACs that answered it within a second.
func (d *l2Lab) arpAnswersOnce(vip string) []string { return d.arping(vip, "-c", "2", "-w", "1") }
