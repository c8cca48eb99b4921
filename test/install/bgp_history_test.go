//go:build envtest

package install

import (
	"context"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// testAgentBGPHistory: in a BGP VIP's history an agent adds a join only of
// its own node, in the write that adds it to announcedBy, and a leave only
// of a node the same write removes from it.
func testAgentBGPHistory(t *testing.T, operator, agentA, agentB client.Client) {
	ctx := context.Background()
	ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.11"},
		Spec: paasv1.IPSpec{Address: "192.0.2.11", Owner: &paasv1.IPOwner{Namespace: "default", Name: "bgp", UID: "u3"}}}
	testenv.Must(t, operator.Create(ctx, ip))
	now := metav1.Now().Rfc3339Copy()
	join := func(n string) paasv1.Failover {
		return paasv1.Failover{At: now, To: n, Cause: paasv1.FailoverElectionChange, GapMilliseconds: ptr.To[int64](3)}
	}
	leave := func(n string, c paasv1.FailoverCause) paasv1.Failover {
		return paasv1.Failover{At: now, From: n, Cause: c}
	}
	add := func(by []string, e ...paasv1.Failover) func(*paasv1.IPStatus) {
		return func(s *paasv1.IPStatus) {
			if by != nil {
				s.AnnouncedBy = by
			}
			s.History = append(s.History, e...)
		}
	}
	for _, tc := range []struct {
		desc    string
		agent   client.Client
		mutate  func(*paasv1.IPStatus)
		refusal string
	}{
		{"a joins, listing itself", agentA, add([]string{"node-a"}, join("node-a")), ""},
		{"b records a's join", agentB, add(nil, join("node-a")), "only moves to its own node, not to node-a"},
		{"b joins without listing itself", agentB, add(nil, join("node-b")), "may add a join to the history of 192.0.2.11 only of its own node"},
		{"b joins, listing itself", agentB, add([]string{"node-a", "node-b"}, join("node-b")), ""},
		{"b joins again, already listed", agentB, add(nil, join("node-b")), "only of its own node, in the write that adds it"},
		{"a records b's leave, b still listed", agentA, add(nil, leave("node-b", paasv1.FailoverOwnerDead)),
			"may add a leave to the history of 192.0.2.11 only of a node the same write removes from announcedBy, not node-b"},
		{"a records the leave of c, never listed", agentA, add([]string{"node-a"}, leave("node-c", paasv1.FailoverOwnerDead)), "not node-c"},
		{"an entry naming no node", agentA, add([]string{"node-a"}, leave("", paasv1.FailoverOwnerDead)), "may add a "},
		{"the recorder a prunes b and records its leave", agentA, add([]string{"node-a"}, leave("node-b", paasv1.FailoverOwnerDead)), ""},
		{"b rewrites its own join's cause", agentB, func(s *paasv1.IPStatus) { s.History[1].Cause = paasv1.FailoverConflict }, "may add a join"},
		{"a leaves, dropping itself", agentA, add([]string{}, leave("node-a", paasv1.FailoverExcluded)), ""},
	} {
		t.Run(tc.desc, func(t *testing.T) { patchIPStatus(t, tc.agent, ip.Name, tc.mutate, tc.refusal) })
	}
	testenv.Must(t, operator.Get(ctx, client.ObjectKeyFromObject(ip), ip))
	if h := ip.Status.History; len(h) != 4 || h[0].To != "node-a" || h[1].To != "node-b" || h[2].From != "node-b" || h[3].From != "node-a" {
		t.Fatalf("history %+v, want a's join, b's join, b's leave, a's leave", h)
	}
}
