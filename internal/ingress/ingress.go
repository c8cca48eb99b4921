// Package ingress reads the addresses a Service's status.loadBalancer.ingress
// shows, for the operator and the agent alike, and writes a list of addresses
// the way every message of theirs shows one.
//
// It decides nothing about them: whether the ledger gives an address to the
// Service is the trust rule's question (nodeagent/trust), whether the
// allocator lets the Service keep it the operator's.
package ingress

import (
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// Shown are the addresses svc's status shows, as the operator judges them:
// every entry whose ip parses (hostnames skipped), IPv4-mapped IPv6 unmapped,
// in status order. Unlike Addrs, an entry with a zone and a repeated entry
// stay: the operator rebuilds, adopts and judges from everything a status
// shows, while the agent carries only what can be a VIP.
func Shown(svc *corev1.Service) []netip.Addr {
	return read(svc, false, false)
}

// Addrs are the addresses the agent may carry for svc, whatever their ipMode:
// as Shown, but each once and without the entries with a zone (no VIP has one:
// such an entry is garbage, not an address).
func Addrs(svc *corev1.Service) []netip.Addr {
	return read(svc, true, false)
}

// ProxyAddrs are the Addrs whose entry has ipMode Proxy: those the agent
// forwards for (with ipMode VIP, kube-proxy or the CNI forwards instead).
func ProxyAddrs(svc *corev1.Service) []netip.Addr {
	return read(svc, true, true)
}

func read(svc *corev1.Service, carried, proxyOnly bool) []netip.Addr {
	var out []netip.Addr
	for _, in := range svc.Status.LoadBalancer.Ingress {
		if proxyOnly && (in.IPMode == nil || *in.IPMode != corev1.LoadBalancerIPModeProxy) {
			continue
		}
		addr, err := netip.ParseAddr(in.IP)
		if err != nil {
			continue
		}
		if carried && addr.Zone() != "" {
			continue
		}
		addr = addr.Unmap()
		if carried && slices.Contains(out, addr) {
			continue
		}
		out = append(out, addr)
	}
	return out
}

// Join writes addrs as messages show a list of addresses: "a, b, c".
func Join(addrs []netip.Addr) string {
	s := make([]string, 0, len(addrs))
	for _, a := range addrs {
		s = append(s, a.String())
	}
	return strings.Join(s, ", ")
}
