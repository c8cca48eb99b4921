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

func bgpAnnounce(nodes *metav1.LabelSelector, peers []string) *paasv1.Announce {
	return &paasv1.Announce{Mode: paasv1.AnnounceBGP, NodeSelector: nodes, BGP: &paasv1.BGPAnnounce{Peers: peers}}
}

func peer(name string, nodes *metav1.LabelSelector) paasv1.BGPPeer {
	return paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513, NodeSelector: nodes}}
}

func TestAnnounceableCondition(t *testing.T) {
	node := func(name, iface, addr string, cordoned bool, lbls map[string]string) corev1.Node {
		n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: lbls, Annotations: map[string]string{
			paasv1.NodeInterfacesAnnotation: `[{"name":"` + iface + `","mac":"02:00:00:00:00:01","addrs":["` + addr + `"]}]`}}}
		n.Spec.Unschedulable = cordoned
		// The kubelet lists the interface's address: that confirms the subnet.
		n.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: strings.Split(addr, "/")[0]}}
		return n
	}
	group := func(announce *paasv1.Announce) *paasv1.IPGroup {
		return &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Generation: 2},
			Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24", Announce: announce}}
	}
	rackA := &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "a"}}
	tests := []struct {
		desc       string
		group      *paasv1.IPGroup
		nodes      []corev1.Node
		wantReason string // "" = no condition
		wantText   string
		peers      []paasv1.BGPPeer
	}{
		{"a node on the segment", group(nil), []corev1.Node{node("n1", "eth0", "192.0.2.11/24", false, nil)}, "NodesAvailable", "n1", nil},
		{"nodes elsewhere", group(nil), []corev1.Node{node("n1", "eth0", "198.51.100.11/24", false, nil)}, "NoInterfaceOnSegment", "192.0.2.0/24", nil},
		{"only node cordoned", group(nil), []corev1.Node{node("n1", "eth0", "192.0.2.11/24", true, nil)}, "NoInterfaceOnSegment", "n1", nil},
		{"only node excluded from load balancers", group(nil), []corev1.Node{node("n1", "eth0", "192.0.2.11/24", false,
			map[string]string{corev1.LabelNodeExcludeBalancers: "true"})}, "NoInterfaceOnSegment", "n1", nil},
		{"a group of addresses only, one on the node's subnet", &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Generation: 2},
			Spec: paasv1.IPGroupSpec{Addresses: []string{"198.51.100.20-198.51.100.30", "192.0.2.64/28"}}},
			[]corev1.Node{node("n1", "eth0", "192.0.2.11/24", false, nil)}, "NodesAvailable", "n1", nil},
		{"a group of addresses only, none on the node's subnet", &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "g", Generation: 2},
			Spec: paasv1.IPGroupSpec{Addresses: []string{"198.51.100.20-198.51.100.30"}}},
			[]corev1.Node{node("n1", "eth0", "192.0.2.11/24", false, nil)}, "NoInterfaceOnSegment", "addresses 198.51.100.20-198.51.100.30", nil},
		{"selector picks no node", group(&paasv1.Announce{NodeSelector: rackA}), []corev1.Node{node("n1", "eth0", "192.0.2.11/24", false, nil)}, "NoNodeSelected", "nodeSelector", nil},
		{"selector picks the node on the segment", group(&paasv1.Announce{NodeSelector: rackA}), []corev1.Node{
			node("n1", "eth0", "198.51.100.11/24", false, map[string]string{"rack": "b"}),
			node("n2", "eth0", "192.0.2.12/24", false, map[string]string{"rack": "a"})}, "NodesAvailable", "n2", nil},
		{"wrong interface named", group(&paasv1.Announce{Interfaces: []string{"eth1"}}), []corev1.Node{node("n1", "eth0", "192.0.2.11/24", false, nil)}, "NoInterfaceOnSegment", "eth1", nil},
		{"no annotation yet", group(nil), []corev1.Node{{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}}, "NoInterfaceOnSegment", "n1", nil},
		{"None group: not applicable", group(&paasv1.Announce{Mode: paasv1.AnnounceNone}), nil, "", "", nil},
		{"BGP group, no peer", group(bgpAnnounce(nil, nil)), []corev1.Node{node("n1", "eth0", "198.51.100.11/24", false, nil)}, "NoBGPPeer", "create one", nil},
		{"BGP group, named peer missing", group(bgpAnnounce(nil, []string{"tor-b"})), []corev1.Node{node("n1", "eth0", "198.51.100.11/24", false, nil)},
			"NoBGPPeer", "tor-b", []paasv1.BGPPeer{peer("tor-a", nil)}},
		{"BGP group, a peer selects a node anywhere", group(bgpAnnounce(nil, nil)), []corev1.Node{node("n1", "eth0", "198.51.100.11/24", false, nil)},
			"NodesAvailable", "n1", []paasv1.BGPPeer{peer("tor-a", nil)}},
		{"BGP group, the only node cordoned", group(bgpAnnounce(nil, nil)), []corev1.Node{node("n1", "eth0", "198.51.100.11/24", true, nil)},
			"NoPeerForNodes", "n1", []paasv1.BGPPeer{peer("tor-a", nil)}},
		{"BGP group, the only node excluded", group(bgpAnnounce(nil, nil)), []corev1.Node{node("n1", "eth0", "198.51.100.11/24", false,
			map[string]string{corev1.LabelNodeExcludeBalancers: ""})}, "NoPeerForNodes", "n1", []paasv1.BGPPeer{peer("tor-a", nil)}},
		{"BGP group, the peer selects other nodes", group(bgpAnnounce(rackA, nil)), []corev1.Node{
			node("n1", "eth0", "198.51.100.11/24", false, map[string]string{"rack": "a"}),
			node("n2", "eth0", "198.51.100.12/24", false, map[string]string{"rack": "b"})},
			"NoPeerForNodes", "nodeSelector", []paasv1.BGPPeer{peer("tor-b", &metav1.LabelSelector{MatchLabels: map[string]string{"rack": "b"}})}},
		{"BGP group, its named peer selects its node", group(bgpAnnounce(rackA, []string{"tor-a"})), []corev1.Node{
			node("n1", "eth0", "198.51.100.11/24", false, map[string]string{"rack": "a"}),
			node("n2", "eth0", "198.51.100.12/24", false, map[string]string{"rack": "b"})},
			"NodesAvailable", "n1", []paasv1.BGPPeer{peer("tor-a", rackA), peer("tor-b", nil)}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			var st paasv1.IPGroupStatus
			setAnnounceableCondition(&st, tt.group, tt.nodes, tt.peers, election.OnCordonHandover)
			c := meta.FindStatusCondition(st.Conditions, paasv1.IPGroupAnnounceable)
			if tt.wantReason == "" {
				if c != nil {
					t.Fatalf("unexpected condition %+v", c)
				}
				return
			}
			if c == nil || c.Reason != tt.wantReason || !strings.Contains(c.Message, tt.wantText) {
				t.Fatalf("condition = %+v, want reason %s mentioning %q", c, tt.wantReason, tt.wantText)
			}
			if want := tt.wantReason == "NodesAvailable"; (c.Status == metav1.ConditionTrue) != want {
				t.Fatalf("status %s for reason %s", c.Status, c.Reason)
			}
		})
	}
}

// With --on-cordon=keep a cordoned node still counts; an excluded one never.
func TestAnnounceableConditionOnCordonKeep(t *testing.T) {
	cordoned := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: map[string]string{
		paasv1.NodeInterfacesAnnotation: `[{"name":"eth0","mac":"02:00:00:00:00:01","addrs":["192.0.2.11/24"]}]`}},
		Spec:   corev1.NodeSpec{Unschedulable: true},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.11"}}}}
	g := &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "g"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24"}}
	for policy, want := range map[election.OnCordon]metav1.ConditionStatus{election.OnCordonKeep: metav1.ConditionTrue, election.OnCordonHandover: metav1.ConditionFalse} {
		var st paasv1.IPGroupStatus
		setAnnounceableCondition(&st, g, []corev1.Node{cordoned}, nil, policy)
		if c := meta.FindStatusCondition(st.Conditions, paasv1.IPGroupAnnounceable); c == nil || c.Status != want {
			t.Errorf("%s: %+v, want %s", policy, c, want)
		}
	}
	excluded := *cordoned.DeepCopy()
	excluded.Spec.Unschedulable = false
	excluded.Labels = map[string]string{corev1.LabelNodeExcludeBalancers: ""}
	var st paasv1.IPGroupStatus
	setAnnounceableCondition(&st, g, []corev1.Node{excluded}, nil, election.OnCordonKeep)
	if c := meta.FindStatusCondition(st.Conditions, paasv1.IPGroupAnnounceable); c == nil || c.Status != metav1.ConditionFalse {
		t.Errorf("excluded node: %+v", c)
	}
}
