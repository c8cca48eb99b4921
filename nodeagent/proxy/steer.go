package proxy

import (
	"context"
	"errors"
	"fmt"
	"net/netip"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
	"github.com/paas-org/vip-allocator-operator/nodeagent/trust"
)

// steered reports whether a Service carried at vips is steered (dataplane.Service.Steer):
// unless one of its addresses comes from a group whose dataPath is EntryNode. An address
// without a ledger group, or whose group is gone, takes the default, steering.
func (s *Syncer) steered(ctx context.Context, vips []netip.Addr, view trust.View) (bool, error) {
	for _, vip := range vips {
		name := view.Groups[vip]
		if name == "" {
			continue
		}
		var g paasv1.IPGroup
		if err := s.Client.Get(ctx, client.ObjectKey{Name: name}, &g); apierrors.IsNotFound(err) {
			continue
		} else if err != nil {
			return false, fmt.Errorf("get IPGroup %s: %w", name, err)
		}
		if !g.Spec.Steered() {
			return false, nil
		}
	}
	return true, nil
}

// setSteering tells each plane that steers who may serve: this node, and every Node with an
// InternalIP of the plane's family (the first one), where a steered flow is sent.
func (s *Syncer) setSteering(planes []dataplane.Plane) error {
	var errs []error
	for _, p := range planes {
		st, ok := p.(dataplane.Steerer)
		if !ok {
			continue
		}
		if err := st.SetSteering(steeringFor(p.Family(), s.Options.NodeName, s.nodeIPs)); err != nil {
			errs = append(errs, fmt.Errorf("steering %s: %w", p.Family(), err))
		}
	}
	return errors.Join(errs...)
}

// steeringFor is the Steering of family fam: each node's first InternalIP of that family.
func steeringFor(fam dataplane.Family, self string, nodeIPs map[string][]netip.Addr) dataplane.Steering {
	out := dataplane.Steering{Node: self, Peers: map[string]netip.Addr{}}
	for name, ips := range nodeIPs {
		for _, ip := range ips {
			if ip.Is4() == (fam == dataplane.IPv4) {
				out.Peers[name] = ip
				break
			}
		}
	}
	return out
}
