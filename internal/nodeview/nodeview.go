// Package nodeview converts between a Node and its NodeView, the small object
// each agent publishes for its own node so that the other agents need not
// watch every Node (a watch of every Node sends each kubelet status report to
// every agent, though no agent reads what a report changes). Of returns the view of a Node, Node the Node an agent sees
// through a view. Both are pure; the rule they keep is that every function
// the agents run on a Node (election.NodeOf, election.InternalIPs, the MACs
// of the node index) gives the same answer on Node(Of(n)) as on n, so an agent reading views and one reading Nodes (a
// rolling upgrade) agree. It must never read anything but its arguments.
package nodeview

import (
	"encoding/json"
	"maps"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Of is the view n's agent publishes: the NodeView named after n, owned by n
// (the garbage collector deletes it with the Node). ok is false while n has
// no interfaces annotation: its agent has not published anything yet, and an
// old agent would not count the node as running one either.
func Of(n *corev1.Node) (v *paasv1.NodeView, ok bool) {
	value, agent := n.Annotations[paasv1.NodeInterfacesAnnotation]
	if !agent {
		return nil, false
	}
	v = &paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: n.Name}}
	if n.UID != "" {
		v.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Node", Name: n.Name, UID: n.UID}}
	}
	v.Spec = SpecOf(n, value)
	return v, true
}

// SpecOf is the spec of n's view, with value its interfaces annotation.
func SpecOf(n *corev1.Node, value string) paasv1.NodeViewSpec {
	s := paasv1.NodeViewSpec{Unschedulable: n.Spec.Unschedulable, Deleting: !n.DeletionTimestamp.IsZero()}
	if len(n.Labels) > 0 {
		s.Labels = maps.Clone(n.Labels)
	}
	// Parsed as the agents parse it: an unreadable annotation is no
	// interface at all, for a view as for the Node.
	for _, ifc := range paasv1.ParseNodeInterfaces(value) {
		out := paasv1.NodeViewInterface{Name: ifc.Name, MAC: ifc.MAC}
		for _, p := range ifc.Addrs {
			out.Addrs = append(out.Addrs, p.String())
		}
		for _, gw := range ifc.Gateways {
			out.Gateways = append(out.Gateways, gw.String())
		}
		s.Interfaces = append(s.Interfaces, out)
	}
	for _, a := range n.Status.Addresses {
		s.Addresses = append(s.Addresses, paasv1.NodeViewAddress{Type: string(a.Type), Address: a.Address})
	}
	return s
}

// Node is the Node as an agent reading v sees it: the fields of the spec
// back in their places on a Node named after v, the interfaces in the
// annotation.
func Node(v *paasv1.NodeView) corev1.Node {
	n := corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: v.Name, Labels: maps.Clone(v.Spec.Labels)}}
	n.Spec.Unschedulable = v.Spec.Unschedulable
	if v.Spec.Deleting {
		// Only whether it is set is ever read.
		n.DeletionTimestamp = ptr.To(metav1.NewTime(time.Unix(0, 0)))
	}
	ifaces := v.Spec.Interfaces
	if ifaces == nil {
		ifaces = []paasv1.NodeViewInterface{}
	}
	// The same JSON as the annotation (NodeViewInterface has its field
	// names); a view whose addresses do not parse is read as the annotation
	// would be: no interface at all.
	value, _ := json.Marshal(ifaces)
	n.Annotations = map[string]string{paasv1.NodeInterfacesAnnotation: string(value)}
	for _, a := range v.Spec.Addresses {
		n.Status.Addresses = append(n.Status.Addresses, corev1.NodeAddress{Type: corev1.NodeAddressType(a.Type), Address: a.Address})
	}
	return n
}

// Differs reports whether the view cur must be rewritten to become want:
// its spec or its owners differ.
func Differs(cur, want *paasv1.NodeView) bool {
	return !specEqual(cur.Spec, want.Spec) || !slices.EqualFunc(cur.OwnerReferences, want.OwnerReferences, func(a, b metav1.OwnerReference) bool {
		return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name && a.UID == b.UID
	})
}

func specEqual(a, b paasv1.NodeViewSpec) bool {
	return a.Unschedulable == b.Unschedulable && a.Deleting == b.Deleting && maps.Equal(a.Labels, b.Labels) &&
		slices.Equal(a.Addresses, b.Addresses) &&
		slices.EqualFunc(a.Interfaces, b.Interfaces, func(x, y paasv1.NodeViewInterface) bool {
			return x.Name == y.Name && x.MAC == y.MAC && slices.Equal(x.Addrs, y.Addrs) && slices.Equal(x.Gateways, y.Gateways)
		})
}

// Trim is n with only what the agents read of it: an agent that reads a Node
// itself (one whose agent publishes no view yet) keeps no more of it than a
// view holds.
func Trim(n *corev1.Node) corev1.Node {
	value, agent := n.Annotations[paasv1.NodeInterfacesAnnotation]
	out := Node(&paasv1.NodeView{ObjectMeta: metav1.ObjectMeta{Name: n.Name}, Spec: SpecOf(n, value)})
	if !agent {
		delete(out.Annotations, paasv1.NodeInterfacesAnnotation)
	}
	return out
}
