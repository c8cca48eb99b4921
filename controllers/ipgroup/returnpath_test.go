package ipgroup

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// twoNetworks is a node whose agent published eth0 with the default route and eth1 on the
// VIPs' network 192.0.2.0/24 (with a router, when eth1Routers says so).
func twoNetworks(name, eth1Routers string) corev1.Node {
	return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"net": "b"}, Annotations: map[string]string{
		paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","addrs":["203.0.113.11/24"],"routers":["203.0.113.1"],"default":["IPv4"]},` +
			`{"name":"eth1","addrs":["192.0.2.11/24"]` + eth1Routers + `}]`}}}
}

func TestReturnPathCondition(t *testing.T) {
	oneNetwork := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "flat", Annotations: map[string]string{
		paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","addrs":["192.0.2.11/24"],"routers":["192.0.2.1"],"default":["IPv4"]}]`}}}
	group := func(gw string, sel *metav1.LabelSelector) *paasv1.IPGroup {
		g := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "b", Generation: 3}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24",
			Announce: &paasv1.Announce{NodeSelector: sel}}}
		if gw != "" {
			g.Spec.Announce.Gateway = &paasv1.Gateway{IPv4: gw}
		}
		return g
	}
	for _, tc := range []struct {
		desc       string
		group      *paasv1.IPGroup
		nodes      []corev1.Node
		wantStatus metav1.ConditionStatus // "" for no condition
		wantReason string
		wantIn     string
	}{
		{desc: "nodes on one network: no condition", group: group("", nil), nodes: []corev1.Node{oneNetwork}},
		{desc: "two networks, the group's gateway", group: group("192.0.2.1", nil), nodes: []corev1.Node{twoNetworks("node1", ""), oneNetwork},
			wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonRouterKnown, wantIn: "1 node(s) on several networks"},
		{desc: "two networks, a router the node's table names", group: group("", nil), nodes: []corev1.Node{twoNetworks("node1", `,"routers":["192.0.2.254"]`)},
			wantStatus: metav1.ConditionTrue, wantReason: paasv1.ReasonRouterKnown},
		{desc: "two networks, no router: named, with the fix", group: group("", nil), nodes: []corev1.Node{twoNetworks("node1", ""), twoNetworks("node2", `,"routers":["192.0.2.254"]`)},
			wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonNoRouterBack, wantIn: "for node1 (eth1, IPv4): replies to the VIPs arriving there leave by the node's default route, on another network; set spec.announce.gateway"},
		{desc: "a gateway off the node's subnet counts for nothing", group: group("198.51.100.1", nil), nodes: []corev1.Node{twoNetworks("node1", "")},
			wantStatus: metav1.ConditionFalse, wantReason: paasv1.ReasonNoRouterBack},
		{desc: "a node the selector leaves out is not judged", group: group("", &metav1.LabelSelector{MatchLabels: map[string]string{"net": "other"}}), nodes: []corev1.Node{twoNetworks("node1", "")}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			var status paasv1.IPGroupStatus
			meta.SetStatusCondition(&status.Conditions, metav1.Condition{Type: paasv1.IPGroupReturnPath, Status: metav1.ConditionUnknown, Reason: "Stale"})
			setReturnPathCondition(&status, tc.group, tc.nodes, nil, election.OnCordonHandover)
			c := meta.FindStatusCondition(status.Conditions, paasv1.IPGroupReturnPath)
			if tc.wantStatus == "" {
				if c != nil {
					t.Fatalf("want no condition, got %+v", c)
				}
				return
			}
			if c == nil || c.Status != tc.wantStatus || c.Reason != tc.wantReason || !strings.Contains(c.Message, tc.wantIn) || c.ObservedGeneration != 3 {
				t.Fatalf("condition %+v: want %s %s with %q", c, tc.wantStatus, tc.wantReason, tc.wantIn)
			}
		})
	}
}
