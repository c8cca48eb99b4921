package nodeagent

import (
	"maps"
	"net/netip"
	"testing"

	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// TestJointCandidacy: the nodes that may carry a shared VIP are those that may
// carry it for every Service on it, and the election picks its owner among them.
func TestJointCandidacy(t *testing.T) {
	set := func(ns ...string) map[string]bool {
		out := map[string]bool{}
		for _, n := range ns {
			out[n] = true
		}
		return out
	}
	cand := func(local map[string]bool) vipCandidacy {
		return vipCandidacy{Candidacy: election.Candidacy{LocalNodes: local}}
	}
	for _, tc := range []struct {
		desc     string
		services []map[string]bool // LocalNodes of each Service on the VIP (nil: Cluster)
		want     map[string]bool
	}{
		{desc: "one Cluster Service: every node", services: []map[string]bool{nil}, want: nil},
		{desc: "two Cluster Services: every node", services: []map[string]bool{nil, nil}, want: nil},
		{desc: "Cluster then Local: the Local one's nodes", services: []map[string]bool{nil, set("n1", "n2")}, want: set("n1", "n2")},
		{desc: "Local then Cluster: the same", services: []map[string]bool{set("n1", "n2"), nil}, want: set("n1", "n2")},
		{desc: "two Local: the nodes with endpoints of both", services: []map[string]bool{set("n1", "n2"), set("n2", "n3")}, want: set("n2")},
		{desc: "two Local, no node with both: none", services: []map[string]bool{set("n1"), set("n3")}, want: set()},
	} {
		var c vipCandidacy
		for i, s := range tc.services {
			c = jointCandidacy(c, i > 0, cand(s))
		}
		if (c.LocalNodes == nil) != (tc.want == nil) || !maps.Equal(c.LocalNodes, tc.want) {
			t.Errorf("%s: %v, want %v", tc.desc, c.LocalNodes, tc.want)
		}
	}

	// The owner of a VIP shared by a Local Service with endpoints on n2 only
	// and a Cluster one is n2, whatever the hash prefers.
	vip := netip.MustParseAddr("192.0.2.10")
	var nodes []election.Node
	for _, n := range []string{"n1", "n2", "n3"} {
		nodes = append(nodes, election.Node{Name: n, Agent: true, Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.1/24")}}})
	}
	c := jointCandidacy(jointCandidacy(vipCandidacy{}, false, cand(nil)), true, cand(set("n2")))
	if owner, _, ok := election.Owner(vip, c.Candidacy, nodes); !ok || owner != "n2" {
		t.Fatalf("owner %q %v, want n2", owner, ok)
	}
	if got := election.Advertisers(c.Candidacy, nodes); len(got) != 1 || got[0] != "n2" {
		t.Fatalf("advertisers %v, want [n2]", got)
	}
}
