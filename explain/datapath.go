package explain

import (
	"fmt"
	"net/netip"
	"slices"

	"strings"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"

	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
)

// dataPath is step 3 for addr: for every node that runs an agent, whether
// what its kernel holds for each Service port of addr (read by its agent,
// not its intent) is the Service's ready endpoints that node should use.
func (o *Observed) dataPath(addr netip.Addr, holders []*corev1.Service) DataPath {
	d := DataPath{Check: Check{OK: true}}
	var bad, unknown []string
	anyWant := false
	for _, n := range o.agentNodes() {
		np := o.nodePath(n.Name, addr, holders)
		for _, p := range np.Ports {
			anyWant = anyWant || len(p.Want) > 0
		}
		switch {
		case o.Facts[n.Name] == nil:
			unknown = append(unknown, n.Name)
		case !np.OK:
			bad = append(bad, n.Name)
		}
		d.Nodes = append(d.Nodes, np)
	}
	switch {
	case len(bad) > 0:
		d.Check = Check{Reason: "the kernel of " + strings.Join(bad, ", ") + " does not hold the Service's ready endpoints"}
	case len(unknown) > 0:
		d.Check = Check{Reason: "unknown on " + strings.Join(unknown, ", ") + ": the agent did not answer"}
	case !anyWant:
		d.Check = Check{Reason: "the Service has no ready endpoint: every node rejects the address's ports"}
	default:
		d.Reason = fmt.Sprintf("every node's kernel holds the ready endpoints (%d nodes)", len(d.Nodes))
	}
	if why := refused(holders); why != "" {
		d.Check = Check{Reason: "the agents refuse to program or announce it: " + why}
	}
	return d
}

// refused is why the agents refuse one of holders' addresses, as they wrote
// it in the Service's Programmed condition ("" when they do not).
func refused(holders []*corev1.Service) string {
	for _, svc := range holders {
		if c := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionProgrammed); c != nil && c.Status == metav1.ConditionFalse {
			return c.Reason + ": " + c.Message
		}
	}
	return ""
}

// nodePath compares node's kernel with the endpoints it should DNAT to.
func (o *Observed) nodePath(node string, addr netip.Addr, holders []*corev1.Service) NodePath {
	np := NodePath{Node: node}
	f := o.Facts[node]
	if f == nil {
		np.Reason = "its agent did not answer: " + o.Unreachable[node]
		return np
	}
	for _, pl := range f.Planes {
		if pl.Error != "" {
			np.Reason = fmt.Sprintf("its agent could not read its %s %s plane: %s", pl.Family, pl.Backend, pl.Error)
			return np
		}
	}
	var wrong []string
	for _, svc := range holders {
		for _, sp := range svc.Spec.Ports {
			p := PortPath{Port: fmt.Sprintf("%d/%s", sp.Port, protocolOf(sp)),
				Want: o.wantEndpoints(svc, sp, addr, node), Kernel: kernelEndpoints(f.Ports, addr, sp)}
			if !slices.Equal(p.Kernel, p.Want) {
				wrong = append(wrong, p.Port)
			}
			np.Ports = append(np.Ports, p)
		}
	}
	np.Check = Check{OK: len(wrong) == 0, Reason: "holds the ready endpoints"}
	if len(wrong) > 0 {
		np.Reason = "the kernel differs for " + strings.Join(wrong, ", ") + ": the agent repairs it on its next full sync; if it stays, see the agent's log and its Programmed condition"
	}
	return np
}

// wantEndpoints are the ready endpoints of svc's port sp of addr's family
// (only node's for policy Local), as address:port, sorted: what the data
// plane DNATs the port to.
func (o *Observed) wantEndpoints(svc *corev1.Service, sp corev1.ServicePort, addr netip.Addr, node string) []string {
	local := svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal
	out := []string{}
	for _, s := range o.slicesOf(svc) {
		port, ok := slicePort(s, sp)
		if !ok {
			continue
		}
		for _, e := range s.Endpoints {
			if (e.Conditions.Ready != nil && !*e.Conditions.Ready) || len(e.Addresses) == 0 {
				continue
			}
			if local && (e.NodeName == nil || *e.NodeName != node) {
				continue
			}
			if a, err := netip.ParseAddr(e.Addresses[0]); err == nil && a.Is4() == addr.Is4() {
				out = append(out, netip.AddrPortFrom(a, uint16(port)).String())
			}
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// slicePort is the port of s that serves sp: the same name and protocol.
func slicePort(s discoveryv1.EndpointSlice, sp corev1.ServicePort) (int32, bool) {
	for _, p := range s.Ports {
		name, proto := "", corev1.ProtocolTCP
		if p.Name != nil {
			name = *p.Name
		}
		if p.Protocol != nil {
			proto = *p.Protocol
		}
		if name == sp.Name && proto == protocolOf(sp) && p.Port != nil && *p.Port != 0 {
			return *p.Port, true
		}
	}
	return 0, false
}

// kernelEndpoints are the endpoints the kernel holds for addr's port sp.
func kernelEndpoints(ports []agentPort, addr netip.Addr, sp corev1.ServicePort) []string {
	out := []string{}
	for _, p := range ports {
		if p.VIP == addr.String() && p.Port == sp.Port && p.Protocol == string(protocolOf(sp)) {
			out = append(out, p.Endpoints...)
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

func protocolOf(sp corev1.ServicePort) corev1.Protocol {
	if sp.Protocol == "" {
		return corev1.ProtocolTCP
	}
	return sp.Protocol
}

// agentPort is one Service port as an agent's kernel holds it.
type agentPort = agentfacts.Port
