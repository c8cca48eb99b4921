package explain

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// TestBGPGolden: a Service whose address a BGP group announces, advertised
// by node1 and node2 (node3 is cordoned); node2's session is up but its
// agent has not sent the route: ✗ at step 4, naming the session.
func TestBGPGolden(t *testing.T) {
	const addr = "192.0.2.50"
	o := lab()
	api := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "api", UID: "uid-api", Annotations: map[string]string{paasv1.IPGroupAnnotation: "routed"}},
		Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: addr}}}}}
	o.Services = append(o.Services, api)
	o.Groups = append(o.Groups, paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "routed"},
		Spec: paasv1.IPGroupSpec{Segment: "192.0.2.48/28", AutoAssign: ptr.To(false), Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP}}})
	o.IPs = append(o.IPs, paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: addr, Labels: map[string]string{paasv1.IPGroupLabel: "routed"}},
		Spec:   paasv1.IPSpec{Address: addr, Owner: &paasv1.IPOwner{Namespace: "default", Name: "api", UID: "uid-api"}},
		Status: paasv1.IPStatus{AnnouncedBy: []string{"node1", "node2"}}})
	since := metav1.NewTime(time.Date(2026, 11, 29, 8, 0, 0, 0, time.UTC))
	o.Peers = []paasv1.BGPPeer{{ObjectMeta: metav1.ObjectMeta{Name: "tor1"}, Status: paasv1.BGPPeerStatus{Sessions: []paasv1.BGPSession{
		{Node: "node1", State: bgpEstablished, Since: &since, BFD: "Up"}, {Node: "node2", State: bgpEstablished, Since: &since, BFD: "Up"},
		{Node: "node3", State: "Active"}}}}}
	o.Facts["node1"].Advertised = map[string][]string{"tor1": {addr}}
	o.Facts["node2"].Advertised = map[string][]string{"tor1": {}}

	r, err := Service(o, types.NamespacedName{Namespace: "default", Name: "api"})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "bgp", r)
	a := r.VIPs[0].Announcement
	if a.OK || len(a.Sessions) != 2 || *a.Sessions[0].Sent != true || *a.Sessions[1].Sent != false {
		t.Fatalf("announcement %+v: want ✗, node1's route sent, node2's not", a)
	}
	o.Facts["node2"].Advertised["tor1"] = []string{addr}
	if r, _ = Service(o, types.NamespacedName{Namespace: "default", Name: "api"}); !r.VIPs[0].Announcement.OK {
		t.Fatalf("both routes sent: %+v, want ✓", r.VIPs[0].Announcement)
	}
}

// TestConflictGolden: a foreign MAC answering for an owned address is ✗ at
// step 4 with the agent's message and since when.
func TestConflictGolden(t *testing.T) {
	o := lab()
	o.IPs[0].Status.Conditions = []metav1.Condition{{Type: paasv1.IPConditionConflict, Status: metav1.ConditionTrue, Reason: paasv1.ReasonForeignMAC,
		LastTransitionTime: metav1.NewTime(time.Date(2026, 11, 29, 8, 30, 0, 0, time.UTC)),
		Message:            "02:00:00:00:00:99 answers ARP for 192.0.2.40 on the segment of node1/eth0, which announces it"}}
	r, err := Service(o, types.NamespacedName{Namespace: "default", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "conflict", r)
	if r.VIPs[0].Announcement.OK {
		t.Fatal("a conflict ✓")
	}
}
