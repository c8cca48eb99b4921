package election

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
)

// TestNotEligible: each refusal, and that Eligible and Allowed agree with it.
func TestNotEligible(t *testing.T) {
	vip := netip.MustParseAddr("192.0.2.40")
	on := []Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.11/24")}}
	off := []Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("203.0.113.11/24")}}
	rack := labels.SelectorFromSet(labels.Set{"rack": "a"})
	steps := []struct {
		desc string
		n    Node
		c    Candidacy
		want Refusal
	}{
		{"eligible", Node{Name: "n", Interfaces: on}, Candidacy{}, ""},
		{"claims the VIP", Node{Name: "n", Interfaces: []Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.40/24")}}}, Candidacy{}, RefusedClaims},
		{"draining", Node{Name: "n", Interfaces: on, Draining: true}, Candidacy{}, RefusedDraining},
		{"excluded", Node{Name: "n", Interfaces: on, Excluded: true, Cordoned: true}, Candidacy{}, RefusedExcluded},
		{"cordoned", Node{Name: "n", Interfaces: on, Cordoned: true}, Candidacy{}, RefusedCordoned},
		{"node selector", Node{Name: "n", Interfaces: on, Labels: labels.Set{"rack": "b"}}, Candidacy{Selector: rack}, RefusedSelector},
		{"no local endpoint", Node{Name: "n", Interfaces: on}, Candidacy{LocalNodes: map[string]bool{"m": true}}, RefusedNoLocalEndpoint},
		{"no interface on the subnet", Node{Name: "n", Interfaces: off}, Candidacy{}, RefusedNoInterface},
		{"not an allowed interface", Node{Name: "n", Interfaces: on}, Candidacy{Interfaces: []string{"eth1"}}, RefusedNoInterface},
	}
	for _, s := range steps {
		_, got := NotEligible(s.n, vip, s.c)
		if got != s.want {
			t.Errorf("%s: %q, want %q", s.desc, got, s.want)
		}
		if _, ok := Eligible(s.n, vip, s.c); ok != (s.want == "") {
			t.Errorf("%s: Eligible %v disagrees", s.desc, ok)
		}
		allowed := s.want == "" || s.want == RefusedNoInterface || s.want == RefusedClaims
		if Allowed(s.n, s.c) != allowed {
			t.Errorf("%s: Allowed %v, want %v", s.desc, !allowed, allowed)
		}
	}
}
