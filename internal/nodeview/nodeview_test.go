package nodeview

import (
	"context"
	"net"
	"net/netip"
	"reflect"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

const ifaces = `[{"name":"eth0","mac":"52:54:00:00:00:01","addrs":["192.0.2.11/24","2001:db8::11/64"],"gateways":["192.0.2.1","fe80::1"]},{"name":"eth1","addrs":["198.51.100.11/24"]}]`

// kubeletNode is a Node as a kubelet and an agent leave it.
func kubeletNode() *corev1.Node {
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "node-a", UID: types.UID("uid-a"),
			Labels:      map[string]string{"kubernetes.io/hostname": "node-a", "rack": "r1"},
			Annotations: map[string]string{paasv1.NodeInterfacesAnnotation: ifaces, "node.alpha.kubernetes.io/ttl": "0"}},
		Status: corev1.NodeStatus{
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.11"}, {Type: corev1.NodeInternalIP, Address: "2001:db8::11"},
				{Type: corev1.NodeExternalIP, Address: "203.0.113.11"}, {Type: corev1.NodeHostName, Address: "node-a"}},
			Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastHeartbeatTime: metav1.Now()}},
			Images:     []corev1.ContainerImage{{Names: []string{"registry.example/app:v1"}, SizeBytes: 1 << 20}},
		},
	}
}

// readAsAgents is everything an agent reads of another Node (see the package
// comment): both sides of the table must agree on it.
type readAsAgents struct {
	Handover, Keep election.Node
	InternalIPs    []netip.Addr
	Addresses      []string
	MACs           []string
	Deleting       bool
}

func read(n *corev1.Node) readAsAgents {
	r := readAsAgents{Handover: election.OnCordonHandover.NodeOf(n), Keep: election.OnCordonKeep.NodeOf(n),
		InternalIPs: election.InternalIPs(n), Deleting: !n.DeletionTimestamp.IsZero()}
	for _, a := range n.Status.Addresses {
		r.Addresses = append(r.Addresses, string(a.Type)+"="+a.Address)
	}
	for _, ifc := range paasv1.ParseNodeInterfaces(n.Annotations[paasv1.NodeInterfacesAnnotation]) {
		if mac, err := net.ParseMAC(ifc.MAC); err == nil {
			r.MACs = append(r.MACs, mac.String())
		}
	}
	return r
}

// TestNodeOfViewReadsAsNode: for every kind of Node, what the agents read of
// the Node seen through its view is what they read of the Node itself.
func TestNodeOfViewReadsAsNode(t *testing.T) {
	cases := []struct {
		desc   string
		change func(*corev1.Node)
	}{
		{"as the kubelet and the agent leave it", func(*corev1.Node) {}},
		{"cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }},
		{"excluded by the label (empty value)", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "" }},
		{"no labels at all", func(n *corev1.Node) { n.Labels = nil }},
		{"being deleted", func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: time.Now()} }},
		{"interfaces annotation unreadable (an agent still counts it)", func(n *corev1.Node) { n.Annotations[paasv1.NodeInterfacesAnnotation] = "{not json" }},
		{"interfaces annotation empty", func(n *corev1.Node) { n.Annotations[paasv1.NodeInterfacesAnnotation] = "" }},
		{"an interface with a bad address (the whole annotation is unread)", func(n *corev1.Node) {
			n.Annotations[paasv1.NodeInterfacesAnnotation] = `[{"name":"eth0","addrs":["192.0.2.300/24"]}]`
		}},
		{"no addresses", func(n *corev1.Node) { n.Status.Addresses = nil }},
		{"a hostile address entry", func(n *corev1.Node) {
			n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: " 192.0.2.99 "})
		}},
	}
	for _, c := range cases {
		t.Run(c.desc, func(t *testing.T) {
			n := kubeletNode()
			c.change(n)
			v, ok := Of(n)
			if !ok {
				t.Fatal("no view of a Node with the interfaces annotation")
			}
			if v.Name != n.Name || len(v.OwnerReferences) != 1 || v.OwnerReferences[0].UID != n.UID || v.OwnerReferences[0].Kind != "Node" {
				t.Errorf("view %s owned by %+v, want Node %s (uid %s)", v.Name, v.OwnerReferences, n.Name, n.UID)
			}
			seen := Node(v)
			if got, want := read(&seen), read(n); !reflect.DeepEqual(got, want) {
				t.Errorf("through the view agents read\n%+v\nfrom the Node\n%+v", got, want)
			}
			trimmed := Trim(n)
			if got, want := read(&trimmed), read(n); !reflect.DeepEqual(got, want) {
				t.Errorf("from the trimmed Node agents read\n%+v\nfrom the Node\n%+v", got, want)
			}
		})
	}
}

// TestNoViewBeforeTheAgentPublishes: a Node its agent has not annotated has no
// view (old agents do not count it as running an agent either).
func TestNoViewBeforeTheAgentPublishes(t *testing.T) {
	n := kubeletNode()
	delete(n.Annotations, paasv1.NodeInterfacesAnnotation)
	if v, ok := Of(n); ok {
		t.Errorf("view %+v of a Node without the interfaces annotation", v.Spec)
	}
	trimmed := Trim(n)
	if got, want := read(&trimmed), read(n); !reflect.DeepEqual(got, want) || got.Handover.Agent {
		t.Errorf("from the trimmed Node agents read\n%+v\nfrom the Node\n%+v", got, want)
	}
}

// TestDiffers is the publisher's one question, in the order a node lives:
// only what the other agents read rewrites the view.
func TestDiffers(t *testing.T) {
	n := kubeletNode()
	published, _ := Of(n)
	steps := []struct {
		desc   string
		change func(*corev1.Node)
		want   bool
	}{
		{"the kubelet's status report (heartbeat, conditions, images)", func(n *corev1.Node) {
			n.Status.Conditions[0].LastHeartbeatTime = metav1.NewTime(time.Now().Add(time.Minute))
			n.Status.Images = append(n.Status.Images, corev1.ContainerImage{Names: []string{"registry.example/app:v2"}})
			n.Status.Allocatable = corev1.ResourceList{corev1.ResourcePods: *n.Status.Capacity.Pods()}
		}, false},
		{"another annotation, a taint, the resource version", func(n *corev1.Node) {
			n.Annotations["example.com/note"] = "x"
			n.Spec.Taints = []corev1.Taint{{Key: "example.com/t", Effect: corev1.TaintEffectNoSchedule}}
			n.ResourceVersion = "42"
		}, false},
		{"cordoned", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
		{"labelled", func(n *corev1.Node) { n.Labels["bgp"] = "yes" }, true},
		{"excluded", func(n *corev1.Node) { n.Labels[corev1.LabelNodeExcludeBalancers] = "true" }, true},
		{"an address changed", func(n *corev1.Node) { n.Status.Addresses[0].Address = "192.0.2.12" }, true},
		{"an interface changed", func(n *corev1.Node) {
			n.Annotations[paasv1.NodeInterfacesAnnotation] = `[{"name":"eth0","mac":"52:54:00:00:00:01","addrs":["192.0.2.12/24"]}]`
		}, true},
		{"a default gateway changed", func(n *corev1.Node) {
			n.Annotations[paasv1.NodeInterfacesAnnotation] = `[{"name":"eth0","mac":"52:54:00:00:00:01","addrs":["192.0.2.12/24"],"gateways":["192.0.2.254"]}]`
		}, true},
		{"the same interfaces written differently (spaces)", func(n *corev1.Node) {
			n.Annotations[paasv1.NodeInterfacesAnnotation] = `[ {"name":"eth0", "mac":"52:54:00:00:00:01", "addrs":["192.0.2.12/24"], "gateways":["192.0.2.254"]} ]`
		}, false},
		{"being deleted", func(n *corev1.Node) { n.DeletionTimestamp = &metav1.Time{Time: time.Now()} }, true},
		{"recreated under the same name (a new uid)", func(n *corev1.Node) { n.UID = "uid-a2" }, true},
	}
	for _, s := range steps {
		s.change(n)
		want, _ := Of(n)
		if got := Differs(published, want); got != s.want {
			t.Errorf("%s: Differs = %v, want %v", s.desc, got, s.want)
		}
		published = want
	}
}

// What a node's agent writes of its own view: the interfaces only. The
// labels, cordon, deletion and addresses stay what the operator copied from
// the Node, whatever the agent's Node says.
func TestAgentUpdateWritesOnlyInterfaces(t *testing.T) {
	cur := &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: paasv1.NodeViewSpec{
		Labels:        map[string]string{corev1.LabelNodeExcludeBalancers: "true"},
		Unschedulable: true,
		Addresses:     []paasv1.NodeViewAddress{{Type: "InternalIP", Address: "192.0.2.11"}},
		Interfaces:    []paasv1.NodeViewInterface{{Name: "eth0", Addrs: []string{"192.0.2.11/24"}}},
	}}
	want := &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: "n1"}, Spec: paasv1.NodeViewSpec{
		Labels:     map[string]string{"pool": "edge"},
		Addresses:  []paasv1.NodeViewAddress{{Type: "InternalIP", Address: "198.51.100.7"}},
		Interfaces: []paasv1.NodeViewInterface{{Name: "eth1", Addrs: []string{"198.51.100.7/24"}}},
	}}
	next, changed := AgentUpdate(cur, want)
	if !changed {
		t.Fatal("the interfaces changed")
	}
	if !next.Spec.Unschedulable || next.Spec.Labels[corev1.LabelNodeExcludeBalancers] != "true" || len(next.Spec.Labels) != 1 ||
		next.Spec.Addresses[0].Address != "192.0.2.11" {
		t.Errorf("the agent rewrote what is the Node's: %+v", next.Spec)
	}
	if next.Spec.Interfaces[0].Name != "eth1" {
		t.Errorf("interfaces = %+v", next.Spec.Interfaces)
	}
	if cur.Spec.Interfaces[0].Name != "eth0" {
		t.Error("cur was changed in place")
	}
	if _, changed := AgentUpdate(next, want); changed {
		t.Error("nothing left to write")
	}
}

// Who writes a view next: the operator at once for a missing view or the
// Node's part, the agent (first) for its interfaces alone.
func TestOutdated(t *testing.T) {
	node := kubeletNode()
	current, _ := Of(node)
	cases := []struct {
		name string
		view *paasv1.NodeView // nil: none yet
		edit func(*corev1.Node)
		want Staleness
	}{
		{"no view yet", nil, nil, NodePart},
		{"up to date", current, nil, Current},
		{"kubelet status only", current, func(n *corev1.Node) { n.Status.Images = nil }, Current},
		{"interfaces changed", current, func(n *corev1.Node) {
			n.Annotations[paasv1.NodeInterfacesAnnotation] = `[{"name":"eth0","addrs":["192.0.2.12/24"]}]`
		}, InterfacesOnly},
		{"cordoned", current, func(n *corev1.Node) { n.Spec.Unschedulable = true }, NodePart},
		{"relabelled", current, func(n *corev1.Node) { n.Labels["rack"] = "r2" }, NodePart},
		{"readdressed", current, func(n *corev1.Node) { n.Status.Addresses[0].Address = "192.0.2.99" }, NodePart},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := fake.NewClientBuilder().WithScheme(paasv1.NewScheme())
			if c.view != nil {
				b = b.WithObjects(c.view.DeepCopy())
			}
			n := node.DeepCopy()
			if c.edit != nil {
				c.edit(n)
			}
			got, err := Outdated(context.Background(), b.Build(), n)
			if err != nil || got != c.want {
				t.Fatalf("Outdated = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}
