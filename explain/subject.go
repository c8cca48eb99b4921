package explain

import (
	"fmt"
	"net/netip"

	"k8s.io/apimachinery/pkg/types"

	"github.com/paas-org/vip-allocator-operator/internal/ingress"
)

// Subject parses what a person asks about, as kubectl names kinds (svc/web,
// ip 192.0.2.7, ipgroup lan, node node1; ns is the namespace of a Service):
// which addresses the agents are asked about, and how the report is made.
func Subject(kind, name, ns string) (addrs func(*Observed) []netip.Addr, report func(*Observed) (Report, error), err error) {
	if name == "" {
		return nil, nil, fmt.Errorf("%q: name what to explain, e.g. svc/web, ip 192.0.2.7, ipgroup lan, node node1", kind)
	}
	switch kind {
	case "svc", "service", "services":
		key := types.NamespacedName{Namespace: ns, Name: name}
		return func(o *Observed) []netip.Addr {
				if svc := o.service(key); svc != nil {
					return ingress.Addrs(svc)
				}
				return nil
			}, func(o *Observed) (Report, error) {
				return Service(o, key)
			}, nil
	case "ip", "ips":
		addr, err := netip.ParseAddr(name)
		if err != nil {
			return nil, nil, fmt.Errorf("ip %q: %w", name, err)
		}
		return func(*Observed) []netip.Addr { return []netip.Addr{addr} }, func(o *Observed) (Report, error) { return IP(o, addr) }, nil
	case "ipgroup", "ipgroups", "ipg":
		return func(o *Observed) []netip.Addr { return o.ledgerAddrs(name) }, func(o *Observed) (Report, error) { return Group(o, name) }, nil
	case "node", "nodes", "no":
		return func(o *Observed) []netip.Addr { return o.ledgerAddrs("") }, func(o *Observed) (Report, error) { return Node(o, name) }, nil
	}
	return nil, nil, fmt.Errorf("cannot explain a %q: want svc, ip, ipgroup or node", kind)
}
