package announce

import (
	"context"
	"maps"
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/changes"
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
	if got := election.Advertisers(vip, c.Candidacy, nodes); len(got) != 1 || got[0] != "n2" {
		t.Fatalf("advertisers %v, want [n2]", got)
	}
}

// TestSharedCandidacies: the announcer's reading of a VIP two Services share,
// one Local (its endpoint on node2) and one Cluster, asks node2 whichever of
// them it reads first.
func TestSharedCandidacies(t *testing.T) {
	for _, names := range [][2]string{{"a-local", "b-cluster"}, {"b-local", "a-cluster"}} {
		localName, clusterName := names[0], names[1]
		svc := func(name string, local bool) *corev1.Service {
			s := uidService(name, "192.0.2.10")
			if local {
				s.Spec.ExternalTrafficPolicy = corev1.ServiceExternalTrafficPolicyLocal
			}
			return s
		}
		ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: "192.0.2.10", Labels: map[string]string{paasv1.IPGroupLabel: "lan"}},
			Spec: paasv1.IPSpec{Address: "192.0.2.10", SharingKey: "k", Owner: &paasv1.IPOwner{Namespace: "ns", Name: clusterName, UID: types.UID("uid-" + clusterName)},
				SharedWith: []paasv1.IPOwner{{Namespace: "ns", Name: localName, UID: types.UID("uid-" + localName)}}}}
		es := &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: localName + "-1", Labels: map[string]string{discoveryv1.LabelServiceName: localName}},
			AddressType: discoveryv1.AddressTypeIPv4,
			Endpoints:   []discoveryv1.Endpoint{{Addresses: []string{"198.51.100.11"}, NodeName: ptr.To("node2"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}}}}
		c := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).
			WithObjects(&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24"}},
				svc(localName, true), svc(clusterName, false), ip, es).
			WithIndex(&discoveryv1.EndpointSlice{}, changes.ServiceNameIndex, func(o client.Object) []string {
				return []string{o.GetLabels()[discoveryv1.LabelServiceName]}
			}).Build()
		a := &Announcer{Client: c, NodeName: "node1", LocalAddresses: func() (map[netip.Addr]string, error) { return nil, nil }}
		got, _, err := a.candidacies(context.Background(), map[string]*paasv1.IP{"192.0.2.10": ip})
		if err != nil {
			t.Fatal(err)
		}
		if l := got[netip.MustParseAddr("192.0.2.10")].LocalNodes; !maps.Equal(l, map[string]bool{"node2": true}) {
			t.Errorf("%v: the shared VIP may be carried by %v, want node2 only", names, l)
		}
	}
}
