package nodeagent

import (
	"net/netip"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// Served reports whether the agent forwards traffic for svc: a LoadBalancer of
// our class (or of none, unless ownClassOnly) holding at least one ingress IP
// with ipMode Proxy. With ipMode VIP, kube-proxy or the CNI forwards instead.
func Served(svc *corev1.Service, ownClassOnly bool) bool {
	return lbclass.Handles(svc, ownClassOnly) && len(proxyVIPs(svc)) > 0
}

func proxyVIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if in.IPMode == nil || *in.IPMode != corev1.LoadBalancerIPModeProxy {
			continue
		}
		if addr, err := netip.ParseAddr(in.IP); err == nil {
			out = append(out, addr.Unmap())
		}
	}
	return out
}

// dataplaneService converts a served Service and its EndpointSlices into what
// the data plane renders. Only ready endpoints count; Local marks those on node.
func dataplaneService(svc *corev1.Service, slices []discoveryv1.EndpointSlice, node string) dataplane.Service {
	out := dataplane.Service{
		Namespace: svc.Namespace,
		Name:      svc.Name,
		VIPs:      proxyVIPs(svc),
		Local:     svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
	}
	for _, p := range svc.Spec.Ports {
		out.Ports = append(out.Ports, dataplane.Port{Name: p.Name, Protocol: dataplane.Protocol(p.Protocol), Port: uint16(p.Port)})
	}
	for _, r := range svc.Spec.LoadBalancerSourceRanges {
		if p, err := netip.ParsePrefix(r); err == nil {
			out.SourceRanges = append(out.SourceRanges, p.Masked())
		}
	}
	for _, slice := range slices {
		var ports []dataplane.EndpointPort
		for _, p := range slice.Ports {
			if p.Port == nil {
				continue
			}
			ep := dataplane.EndpointPort{Protocol: dataplane.Protocol(corev1.ProtocolTCP), Port: uint16(*p.Port)}
			if p.Name != nil {
				ep.Name = *p.Name
			}
			if p.Protocol != nil {
				ep.Protocol = dataplane.Protocol(*p.Protocol)
			}
			ports = append(ports, ep)
		}
		for _, e := range slice.Endpoints {
			if e.Conditions.Ready != nil && !*e.Conditions.Ready {
				continue
			}
			local := e.NodeName != nil && *e.NodeName == node
			for _, a := range e.Addresses {
				if addr, err := netip.ParseAddr(a); err == nil {
					out.Endpoints = append(out.Endpoints, dataplane.Endpoint{Addr: addr.Unmap(), Local: local, Ports: ports})
				}
			}
		}
	}
	return out
}
