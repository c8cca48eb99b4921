package proxy

import (
	"net/netip"
	"slices"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"

	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// Carried are the addresses the agent forwards traffic for of svc, a
// LoadBalancer of our class (or of none, unless ownClassOnly): its ingress IPs
// with ipMode Proxy and, whatever their ipMode, those awaiting the data path
// (the operator adopted them and writes Proxy once the agents carry them:
// trust.View.AwaitingDataPath). With ipMode VIP, kube-proxy or the CNI
// forwards the others. Whether the ledger gives them to svc is the trust
// rule's to say (programmable.go).
func Carried(svc *corev1.Service, ownClassOnly bool, awaiting map[netip.Addr]bool) []netip.Addr {
	if !lbclass.Handles(svc, ownClassOnly) {
		return nil
	}
	proxied := ingress.ProxyAddrs(svc)
	if len(awaiting) == 0 {
		return proxied
	}
	var out []netip.Addr
	for _, addr := range ingress.Addrs(svc) {
		if awaiting[addr] || slices.Contains(proxied, addr) {
			out = append(out, addr)
		}
	}
	return out
}

// parseSourceRanges reads spec.loadBalancerSourceRanges as Kubernetes
// validates it: CIDRs, spaces around them tolerated (the API server allows
// them, for the annotation it replaced), no leading zeros, no zone, no
// IPv4-mapped IPv6, a mask always (a bare address is no CIDR). Host bits are
// masked off. invalid are the entries that are none of that: the caller must
// then admit nobody (fail closed). Dropping them instead would widen the
// allow-list, to everyone when every entry is bad.
func parseSourceRanges(ranges []string) (out []netip.Prefix, invalid []string) {
	for _, r := range ranges {
		p, err := netip.ParsePrefix(strings.TrimSpace(r))
		if err != nil || p.Addr().Is4In6() {
			invalid = append(invalid, r)
			continue
		}
		out = append(out, p.Masked())
	}
	return out, invalid
}

// sessionAffinity is how long a client stays with its endpoint under sessionAffinity
// ClientIP (10800 s unless sessionAffinityConfig says otherwise, as in kube-proxy); 0 for
// no affinity.
func sessionAffinity(spec *corev1.ServiceSpec) time.Duration {
	if spec.SessionAffinity != corev1.ServiceAffinityClientIP {
		return 0
	}
	secs := int32(corev1.DefaultClientIPServiceAffinitySeconds)
	if c := spec.SessionAffinityConfig; c != nil && c.ClientIP != nil && c.ClientIP.TimeoutSeconds != nil && *c.ClientIP.TimeoutSeconds > 0 {
		secs = *c.ClientIP.TimeoutSeconds
	}
	return time.Duration(secs) * time.Second
}

// dataplaneService converts a served Service (its Carried addresses, vips) and
// its EndpointSlices into what the data plane renders. Only ready endpoints
// count; Local marks those on node.
// Source ranges with an entry that does not parse close the Service (see
// parseSourceRanges).
func dataplaneService(svc *corev1.Service, vips []netip.Addr, endpointSlices []discoveryv1.EndpointSlice, node string) dataplane.Service {
	out := dataplane.Service{
		Namespace: svc.Namespace,
		Name:      svc.Name,
		VIPs:      vips,
		Local:     svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal,
		Affinity:  sessionAffinity(&svc.Spec),
	}
	for _, p := range svc.Spec.Ports {
		out.Ports = append(out.Ports, dataplane.Port{Name: p.Name, Protocol: dataplane.Protocol(p.Protocol), Port: uint16(p.Port)})
	}
	var invalid []string
	out.SourceRanges, invalid = parseSourceRanges(svc.Spec.LoadBalancerSourceRanges)
	out.Closed = len(invalid) > 0
	for _, slice := range endpointSlices {
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
			var on string
			if e.NodeName != nil {
				on = *e.NodeName
			}
			for _, a := range e.Addresses {
				if addr, err := netip.ParseAddr(a); err == nil {
					out.Endpoints = append(out.Endpoints, dataplane.Endpoint{Addr: addr.Unmap(), Local: local, Node: on, Ports: ports})
				}
			}
		}
	}
	return out
}
