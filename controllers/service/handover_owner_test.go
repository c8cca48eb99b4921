package service

import (
	"net/netip"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// handOverNode is a Node whose agent published one interface on 192.0.2.0/24.
func handOverNode(name string, ready corev1.ConditionStatus, addr string) corev1.Node {
	return corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{
			paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","addrs":["` + addr + `/24"]}]`}},
		Status: corev1.NodeStatus{
			Addresses:  []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: ready}}},
	}
}

// A node that writes itself into announcedBy and programmedBy of an adopted address
// ends neither part of its hand-over: the operator asks the election, which keeps the
// address on the node it was adopted from while that one may carry it.
func TestHandOverFollowsTheElection(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.100")
	nodes := []corev1.Node{
		handOverNode("n1", corev1.ConditionTrue, "192.0.2.11"),
		handOverNode("n2", corev1.ConditionTrue, "192.0.2.12"),
		handOverNode("n3", corev1.ConditionTrue, "192.0.2.13"),
	}
	forged := &paasv1.IP{
		Spec:   paasv1.IPSpec{AwaitingDataPath: true, AdoptedFromNode: "n1"},
		Status: paasv1.IPStatus{AnnouncedBy: []string{"n3"}, ProgrammedBy: []string{"n3"}},
	}
	steps := []struct {
		desc                  string
		nodes                 []corev1.Node
		wantOwner             string
		wantReady, wantForget bool
	}{
		{"n3 wrote itself in place of n1, which is Ready", nodes, "n1", false, false},
		{"n1 is NotReady: the election moves the address, and n3 may be its owner", []corev1.Node{
			handOverNode("n1", corev1.ConditionFalse, "192.0.2.11"), nodes[1], nodes[2]}, "", false, false},
		{"no node may carry it", nil, "", false, false},
	}
	for _, s := range steps {
		c := election.Candidacy{Preferred: forged.Spec.AdoptedFromNode}
		owner := handOverOwner(vip, c, s.nodes, election.OnCordonHandover)
		if s.wantOwner != "" && owner != s.wantOwner {
			t.Errorf("%s: owner = %q, want %q", s.desc, owner, s.wantOwner)
		}
		if s.wantOwner == "" && s.nodes != nil {
			if owner == "n1" || owner == "" {
				t.Errorf("%s: owner = %q, want n2 or n3", s.desc, owner)
			}
			// Whichever the hash picks ends the hand-over only once it announced and programmed it.
			want := owner == "n3"
			if got := forged.ProxyReady(paasv1.AnnounceL2, owner); got != want {
				t.Errorf("%s: ProxyReady = %v, want %v (owner %s)", s.desc, got, want, owner)
			}
			if got := forged.AdoptedNodeLeft(owner); got != want {
				t.Errorf("%s: AdoptedNodeLeft = %v, want %v (owner %s)", s.desc, got, want, owner)
			}
			continue
		}
		if got := forged.ProxyReady(paasv1.AnnounceL2, owner); got != s.wantReady {
			t.Errorf("%s: ProxyReady = %v, want %v", s.desc, got, s.wantReady)
		}
		if got := forged.AdoptedNodeLeft(owner); got != s.wantForget {
			t.Errorf("%s: AdoptedNodeLeft = %v, want %v", s.desc, got, s.wantForget)
		}
	}
}
