package explain

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// Observed is everything a report is made from, read once (read.go).
type Observed struct {
	Services []corev1.Service
	// NamespaceLabels are the labels of each namespace a Service is in.
	NamespaceLabels map[string]map[string]string
	Groups          []paasv1.IPGroup
	IPs             []paasv1.IP
	Nodes           []corev1.Node
	Slices          []discoveryv1.EndpointSlice
	Peers           []paasv1.BGPPeer
	// Facts are what each node's agent said of its node (by node).
	Facts map[string]*agentfacts.Facts
	// Unreachable says, by node, why its agent did not answer.
	Unreachable map[string]string
	// OwnClassOnly is the operator's --own-class-only: only Services of
	// vip-allocator's loadBalancerClass are served.
	OwnClassOnly bool
}

// service is the Service key names, nil when there is none.
func (o *Observed) service(key types.NamespacedName) *corev1.Service {
	for i := range o.Services {
		if o.Services[i].Namespace == key.Namespace && o.Services[i].Name == key.Name {
			return &o.Services[i]
		}
	}
	return nil
}

// ledger is addr's IP object, nil when there is none.
func (o *Observed) ledger(addr netip.Addr) *paasv1.IP {
	name := paasv1.IPObjectName(addr)
	for i := range o.IPs {
		if o.IPs[i].Name == name {
			return &o.IPs[i]
		}
	}
	return nil
}

// group is the IPGroup named name, nil when there is none.
func (o *Observed) group(name string) *paasv1.IPGroup {
	for i := range o.Groups {
		if o.Groups[i].Name == name {
			return &o.Groups[i]
		}
	}
	return nil
}

// holders are the Services ip names as holding its address, that exist.
func (o *Observed) holders(ip *paasv1.IP) []*corev1.Service {
	var out []*corev1.Service
	for _, h := range ledger.Holders(ip) {
		if svc := o.service(types.NamespacedName{Namespace: h.Namespace, Name: h.Name}); svc != nil && svc.UID == h.UID {
			out = append(out, svc)
		}
	}
	return out
}

// slicesOf are the EndpointSlices of svc.
func (o *Observed) slicesOf(svc *corev1.Service) []discoveryv1.EndpointSlice {
	var out []discoveryv1.EndpointSlice
	for _, s := range o.Slices {
		if s.Namespace == svc.Namespace && s.Labels[discoveryv1.LabelServiceName] == svc.Name {
			out = append(out, s)
		}
	}
	return out
}

// agentNodes are the Nodes whose agent published its interfaces (runs at
// all), sorted by name.
func (o *Observed) agentNodes() []*corev1.Node {
	var out []*corev1.Node
	for i := range o.Nodes {
		if _, ok := o.Nodes[i].Annotations[paasv1.NodeInterfacesAnnotation]; ok {
			out = append(out, &o.Nodes[i])
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Node) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// node is the Node named name, nil when there is none.
func (o *Observed) node(name string) *corev1.Node {
	for i := range o.Nodes {
		if o.Nodes[i].Name == name {
			return &o.Nodes[i]
		}
	}
	return nil
}

// ledgerAddrs are the addresses of every IP object that names a holder,
// sorted; of group only, unless group is "".
func (o *Observed) ledgerAddrs(group string) []netip.Addr {
	var out []netip.Addr
	for i := range o.IPs {
		ip := &o.IPs[i]
		if addr, ok := ip.Addr(); ok && len(ledger.Holders(ip)) > 0 && (group == "" || ip.Labels[paasv1.IPGroupLabel] == group) {
			out = append(out, addr)
		}
	}
	slices.SortFunc(out, netip.Addr.Compare)
	return out
}
