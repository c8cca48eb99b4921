package explain

import (
	"bytes"
	"flag"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

var update = flag.Bool("update", false, "rewrite testdata/*.golden from the output")

const vip = "192.0.2.40"

// lab is three nodes on 192.0.2.0/24 (node3 cordoned), the IPGroups lan
// (auto-assign), manual (autoAssign false) and tenant (a serviceSelector
// web does not match), the Service web holding vip with one ready endpoint,
// and the Service pending the operator could not serve.
func lab() *Observed {
	at := time.Date(2026, 11, 29, 9, 0, 0, 0, time.UTC)
	ifaces := func(addr string) string {
		return `[{"name":"eth0","mac":"02:00:00:00:00:01","addrs":["` + addr + `/24"]}]`
	}
	node := func(name, addr string, cordoned bool) corev1.Node {
		return corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: ifaces(addr)}},
			Spec: corev1.NodeSpec{Unschedulable: cordoned},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
				Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}}}}
	}
	web := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", UID: "uid-web"},
		Spec:   corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80, Protocol: corev1.ProtocolTCP}}},
		Status: corev1.ServiceStatus{LoadBalancer: corev1.LoadBalancerStatus{Ingress: []corev1.LoadBalancerIngress{{IP: vip, IPMode: ptr.To(corev1.LoadBalancerIPModeProxy)}}}}}
	pending := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "pending", UID: "uid-pending",
		Annotations: map[string]string{paasv1.IPGroupAnnotation: "tenant"}},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer, Ports: []corev1.ServicePort{{Name: "http", Port: 80}}},
		Status: corev1.ServiceStatus{Conditions: []metav1.Condition{{Type: paasv1.ConditionIPAllocated, Status: metav1.ConditionFalse,
			Reason: paasv1.ReasonGroupNotAllowed, Message: "IPGroup tenant does not admit this Service: its namespaceSelector or serviceSelector does not match"}}}}
	ip := paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: vip, Labels: map[string]string{paasv1.IPGroupLabel: "lan"}},
		Spec: paasv1.IPSpec{Address: vip, Owner: &paasv1.IPOwner{Namespace: "default", Name: "web", UID: "uid-web"}},
		Status: paasv1.IPStatus{AnnouncedBy: []string{"node1"}, History: []paasv1.Failover{
			{At: metav1.NewTime(at.Add(-time.Hour)), From: "node2", To: "node1", Cause: paasv1.FailoverOwnerDead, GapMilliseconds: ptr.To[int64](212)}}}}
	group := func(name string, auto bool, sel *metav1.LabelSelector) paasv1.IPGroup {
		return paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:   paasv1.IPGroupSpec{Segment: "192.0.2.0/24", AutoAssign: ptr.To(auto), ServiceSelector: sel},
			Status: paasv1.IPGroupStatus{Capacity: "254", Allocated: 1, Available: "253"}}
	}
	slice := discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web-1", Labels: map[string]string{discoveryv1.LabelServiceName: "web"}},
		AddressType: discoveryv1.AddressTypeIPv4,
		Ports:       []discoveryv1.EndpointPort{{Name: ptr.To("http"), Protocol: ptr.To(corev1.ProtocolTCP), Port: ptr.To[int32](8080)}},
		Endpoints: []discoveryv1.Endpoint{
			{Addresses: []string{"198.51.100.11"}, NodeName: ptr.To("node1"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(true)}},
			{Addresses: []string{"198.51.100.12"}, NodeName: ptr.To("node2"), Conditions: discoveryv1.EndpointConditions{Ready: ptr.To(false)}}}}
	facts := func(n string, eps ...string) *agentfacts.Facts {
		f := &agentfacts.Facts{Node: n, At: at, OnCordon: "handover", Alive: map[string]bool{"node1": false, "node2": false, "node3": false},
			Planes: []agentfacts.Plane{{Family: "IPv4", Backend: "nftables"}}, Answering: map[string]string{}}
		f.Ports = []agentfacts.Port{{VIP: vip, Protocol: "TCP", Port: 80, Endpoints: eps}}
		return f
	}
	o := &Observed{
		Services: []corev1.Service{web, pending},
		Groups: []paasv1.IPGroup{group("lan", true, nil), group("manual", false, nil),
			group("tenant", true, &metav1.LabelSelector{MatchLabels: map[string]string{"team": "a"}})},
		IPs:         []paasv1.IP{ip},
		Nodes:       []corev1.Node{node("node1", "192.0.2.11", false), node("node2", "192.0.2.12", false), node("node3", "192.0.2.13", true)},
		Slices:      []discoveryv1.EndpointSlice{slice},
		Facts:       map[string]*agentfacts.Facts{"node1": facts("node1", "198.51.100.11:8080"), "node2": facts("node2", "198.51.100.11:8080", "198.51.100.12:8080")},
		Unreachable: map[string]string{"node3": "Get \"https://203.0.113.13:9478/debug/vips\": connection refused"},
	}
	o.Facts["node1"].Answering[vip] = "eth0"
	o.Facts["node1"].Announced = map[string]time.Time{vip: at.Add(-time.Hour)}
	return o
}

// golden compares out with testdata/name.golden (or rewrites it with -update).
func golden(t *testing.T, name string, r Report) {
	t.Helper()
	var b bytes.Buffer
	if err := Render(&b, r); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("testdata", name+".golden")
	if *update {
		if err := os.WriteFile(path, b.Bytes(), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if b.String() != string(want) {
		t.Errorf("%s: got\n%s\nwant\n%s", name, b.String(), want)
	}
}

func TestServiceGolden(t *testing.T) {
	o := lab()
	r, err := Service(o, types.NamespacedName{Namespace: "default", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "service", r)
	if r.WhatIfDrain = ptr.To(WhatIfDrain(o, r, "node1")); len(r.WhatIfDrain.Moves) != 1 {
		t.Fatalf("drain of the owner moves %+v, want the one address", r.WhatIfDrain.Moves)
	}
	golden(t, "service-drain", r)
	p, err := Service(o, types.NamespacedName{Namespace: "default", Name: "pending"})
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "pending", p)
}

func TestGroupAndNodeGolden(t *testing.T) {
	o := lab()
	g, err := Group(o, "lan")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "group", g)
	n, err := Node(o, "node3")
	if err != nil {
		t.Fatal(err)
	}
	golden(t, "node", n)
	if _, err := Node(o, "node9"); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("unknown node: %v, want not found", err)
	}
}

// TestSplitViewIsAProblem: an agent that sees other agents alive than the
// view the election runs on is named at the top.
func TestSplitViewIsAProblem(t *testing.T) {
	o := lab()
	o.Facts["node2"].Alive = map[string]bool{"node2": false}
	r, err := Service(o, types.NamespacedName{Namespace: "default", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Problems) != 2 || !strings.Contains(r.Problems[1], "node2's agent sees node2 alive, node1's sees node1, node2, node3") {
		t.Fatalf("problems %q: want node2's view named", r.Problems)
	}
}

// TestRefusalIsTheAgents: the agents' Programmed condition on the Service
// (their refusal to carry an address) makes the data path ✗ with its reason;
// no agent answering is said at the top.
func TestRefusalIsTheAgents(t *testing.T) {
	o := lab()
	o.Services[0].Status.Conditions = []metav1.Condition{{Type: paasv1.ConditionProgrammed, Status: metav1.ConditionFalse,
		Reason: paasv1.ReasonNodeAddress, Message: "192.0.2.40 is the address of Node node9"}}
	o.Facts = map[string]*agentfacts.Facts{}
	r, err := Service(o, types.NamespacedName{Namespace: "default", Name: "web"})
	if err != nil {
		t.Fatal(err)
	}
	if d := r.VIPs[0].DataPath; d.OK || !strings.Contains(d.Reason, "NodeAddress: 192.0.2.40 is the address of Node node9") {
		t.Fatalf("data path %+v: want ✗ with the agents' refusal", d.Check)
	}
	if !slices.ContainsFunc(r.Problems, func(p string) bool { return strings.HasPrefix(p, "no agent answered") }) {
		t.Fatalf("problems %q: want no agent answering said", r.Problems)
	}
}

// TestElectionIsTheAgents checks that the owner explain names is the one
// the agents' election picks over the same alive nodes, and that the
// cordoned node is passed over for being cordoned.
func TestElectionIsTheAgents(t *testing.T) {
	o := lab()
	r, err := IP(o, netip.MustParseAddr(vip))
	if err != nil {
		t.Fatal(err)
	}
	var alive []election.Node
	for i := range o.Nodes {
		alive = append(alive, election.NodeOf(&o.Nodes[i]))
	}
	owner, _, _ := election.Owner(netip.MustParseAddr(vip), election.Candidacy{}, alive)
	e := r.VIPs[0].Election
	if e.Owner != owner {
		t.Fatalf("owner %s, the election's %s", e.Owner, owner)
	}
	for _, c := range e.Nodes {
		if c.Node == "node3" && (c.Eligible || c.Reason != string(election.RefusedCordoned)) {
			t.Fatalf("node3: %+v, want refused as cordoned", c)
		}
	}
}

// TestAdoptedFromNodeIsTheAgents: an address adopted from MetalLB's node2
// (the ledger's spec.adoptedFromNode) is node2's while node2 may carry it,
// as the agents elect it, and the node the hash prefers is told why not.
func TestAdoptedFromNodeIsTheAgents(t *testing.T) {
	o := lab()
	o.IPs[0].Spec.AdoptedFromNode = "node2"
	r, err := IP(o, netip.MustParseAddr(vip))
	if err != nil {
		t.Fatal(err)
	}
	e := r.VIPs[0].Election
	if e.Owner != "node2" {
		t.Fatalf("owner %s, want node2, the node the address was adopted from", e.Owner)
	}
	for _, c := range e.Nodes {
		if c.Node == "node1" && c.Reason != "eligible (eth0), but the address was adopted from node2, which keeps it while eligible" {
			t.Fatalf("node1: %q", c.Reason)
		}
	}
}
