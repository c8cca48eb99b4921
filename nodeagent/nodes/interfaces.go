package nodes

import (
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
	"github.com/paas-org/vip-allocator-operator/nodeagent/returnpath"
)

// LocalInterfaces lists this node's interfaces that can announce a VIP: up,
// not loopback, with their global unicast addresses and the default gateways
// through them. A gateway through an interface with no such address (an
// unnumbered link) is not published: no VIP is announced there either.
func LocalInterfaces() ([]paasv1.NodeInterface, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	routes, err := returnpath.MainRoutes()
	if err != nil {
		return nil, err
	}
	routed, err := returnpath.InterfacesRouted(routes)
	if err != nil {
		return nil, err
	}
	gateways := defaultGateways(routes)
	var out []paasv1.NodeInterface
	for _, ifi := range ifaces {
		if ifi.Flags&net.FlagUp == 0 || ifi.Flags&net.FlagLoopback != 0 || len(ifi.HardwareAddr) == 0 {
			continue
		}
		addrs, err := ifi.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
		}
		entry := paasv1.NodeInterface{Name: ifi.Name, MAC: ifi.HardwareAddr.String(), Gateways: gateways[ifi.Index]}
		for _, a := range addrs {
			p, err := netip.ParsePrefix(a.String())
			if err != nil || !p.Addr().IsGlobalUnicast() {
				continue
			}
			entry.Addrs = append(entry.Addrs, paasv1.Plausible(p))
		}
		if len(entry.Addrs) > 0 {
			out = append(out, withRoutes(entry, routed))
		}
	}
	return out, nil
}

// withRoutes adds to entry what the main routing table says of its interface (routed,
// read by returnpath.InterfacesRouted): its routers and the families of the default route by it.
func withRoutes(entry paasv1.NodeInterface, routed []returnplan.Interface) paasv1.NodeInterface {
	for _, r := range routed {
		if r.Name != entry.Name {
			continue
		}
		for _, fam := range []allocator.Family{allocator.IPv4, allocator.IPv6} {
			if gw := r.Gateways[fam]; gw.IsValid() {
				entry.Routers = append(entry.Routers, gw)
			}
			if r.Default[fam] {
				entry.Default = append(entry.Default, string(fam))
			}
		}
	}
	return entry
}

// LocalAddresses maps every address of this node's network namespace, on any
// interface (up or down, loopback included), to its interface: addresses the
// agent must never program or announce as a VIP (package trust).
func LocalAddresses() (map[netip.Addr]string, error) {
	ifaces, err := net.Interfaces()
	if err != nil {
		return nil, fmt.Errorf("list interfaces: %w", err)
	}
	out := map[netip.Addr]string{}
	for _, ifi := range ifaces {
		addrs, err := ifi.Addrs()
		if err != nil {
			return nil, fmt.Errorf("addresses of %s: %w", ifi.Name, err)
		}
		for _, a := range addrs {
			if p, err := netip.ParsePrefix(a.String()); err == nil {
				out[p.Addr().Unmap()] = ifi.Name
			}
		}
	}
	return out, nil
}

// OwnAddresses reads this node's own addresses with read, or from its
// interfaces (LocalAddresses) when read is nil: tests and benchmarks running
// many agents in one network namespace give each agent its own.
func OwnAddresses(read func() (map[netip.Addr]string, error)) (map[netip.Addr]string, error) {
	if read != nil {
		return read()
	}
	return LocalAddresses()
}

// InterfacePublisher keeps this node's NodeInterfacesAnnotation current, so the
// other agents (and the operator) know which subnets this node can announce.
type InterfacePublisher struct {
	Client   client.Client
	NodeName string
	Period   time.Duration
}

// Start publishes now and every Period until ctx ends (a manager Runnable).
func (p *InterfacePublisher) Start(ctx context.Context) error {
	tick := time.NewTicker(p.Period)
	defer tick.Stop()
	for {
		if err := p.Publish(ctx); err != nil {
			// Not fatal: the previous annotation stays; retried next period.
			ctrl.LoggerFrom(ctx).Error(err, "publish interfaces")
		}
		select {
		case <-ctx.Done():
			return nil
		case <-tick.C:
		}
	}
}

// Publish patches the annotation when the interfaces changed.
func (p *InterfacePublisher) Publish(ctx context.Context) error {
	ifaces, err := LocalInterfaces()
	if err != nil {
		return err
	}
	value, err := json.Marshal(ifaces)
	if err != nil {
		return err
	}
	var node corev1.Node
	if err := p.Client.Get(ctx, client.ObjectKey{Name: p.NodeName}, &node); err != nil {
		return fmt.Errorf("get Node %s: %w", p.NodeName, err)
	}
	if node.Annotations[paasv1.NodeInterfacesAnnotation] == string(value) {
		return nil
	}
	patch := client.MergeFrom(node.DeepCopy())
	if node.Annotations == nil {
		node.Annotations = map[string]string{}
	}
	node.Annotations[paasv1.NodeInterfacesAnnotation] = string(value)
	if err := p.Client.Patch(ctx, &node, patch); err != nil {
		return fmt.Errorf("annotate Node %s with its interfaces: %w", p.NodeName, err)
	}
	return nil
}
