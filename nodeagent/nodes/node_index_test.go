package nodes

import (
	"net"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
)

func nodeWithInterfaces(name, annotation string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: annotation}}}
}

func TestNodeIndexMACs(t *testing.T) {
	var m Index
	mac := func(s string) net.HardwareAddr { h, _ := net.ParseMAC(s); return h }
	if m.HasMAC(mac("02:00:00:00:00:01")) {
		t.Fatal("an empty index knows a MAC")
	}
	steps := []struct {
		desc  string
		nodes []corev1.Node
		known []string
		not   []string
	}{
		{"two nodes, any spelling of the MAC", []corev1.Node{
			nodeWithInterfaces("n1", `[{"name":"eth0","mac":"02:00:00:00:00:01","addrs":["192.0.2.11/24"]}]`),
			nodeWithInterfaces("n2", `[{"name":"eth0","mac":"02:00:00:00:00:02","addrs":[]},{"name":"eth1","mac":"02:00:00:00:00:03","addrs":[]}]`),
		}, []string{"02:00:00:00:00:01", "02-00-00-00-00-02", "02:00:00:00:00:03"}, []string{"02:00:00:00:00:04"}},
		{"n2 gone, n1's annotation garbage: nothing known", []corev1.Node{
			nodeWithInterfaces("n1", `not json`),
		}, nil, []string{"02:00:00:00:00:01", "02:00:00:00:00:02"}},
	}
	for _, s := range steps {
		m.Update(s.nodes)
		for _, k := range s.known {
			if !m.HasMAC(mac(k)) {
				t.Errorf("%s: %s not known", s.desc, k)
			}
		}
		for _, k := range s.not {
			if m.HasMAC(mac(k)) {
				t.Errorf("%s: %s known", s.desc, k)
			}
		}
	}
}

// TestNodeIndexAllIn: an agent counts every agent it could only when each
// node it knows has a member (who admits whom decides the elections).
func TestNodeIndexAllIn(t *testing.T) {
	var x Index
	x.Update([]corev1.Node{nodeWithInterfaces("n1", `[]`), nodeWithInterfaces("n2", `[]`)})
	for _, c := range []struct {
		desc    string
		members map[string]membership.State
		want    bool
	}{
		{"only itself", map[string]membership.State{"n1": membership.Active}, false},
		{"both", map[string]membership.State{"n1": membership.Active, "n2": membership.Draining}, true},
		{"both and one it cannot place yet", map[string]membership.State{"n1": membership.Active, "n2": membership.Active, "n3": membership.Active}, true},
	} {
		if got := x.AllIn(c.members); got != c.want {
			t.Errorf("%s: AllIn = %v, want %v", c.desc, got, c.want)
		}
	}
}
