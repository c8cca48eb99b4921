package nodes

import (
	"fmt"
	"net"
	"net/netip"
	"slices"
	"sync"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
)

// Index is what the LAN-facing parts ask of the Nodes many times a
// second, kept ready: the MACs of their interfaces (from the interface
// annotations: a claim of a VIP by one of them is a hand-over, not a
// conflict) and their InternalIPs (the only addresses a node's agent may
// gossip from). Every announce pass rebuilds it from the Nodes it lists (a
// change of any Node triggers a pass), and so does every round of joins, so
// a packet costs one map lookup, never a list of the Nodes.
type Index struct {
	// unknown hears of the nodes a member named that the index does not know
	// (nil: nobody): their agents may publish no view yet (node_views.go).
	Unknown func(node string)

	mu    sync.RWMutex
	macs  map[string]bool
	addrs map[string][]netip.Addr // node name → InternalIPs
}

// Update rebuilds the index from nodes.
func (x *Index) Update(nodes []corev1.Node) {
	macs, addrs := map[string]bool{}, map[string][]netip.Addr{}
	for i := range nodes {
		n := &nodes[i]
		for _, ifc := range paasv1.ParseNodeInterfaces(n.Annotations[paasv1.NodeInterfacesAnnotation]) {
			if mac, err := net.ParseMAC(ifc.MAC); err == nil {
				macs[string(mac)] = true
			}
		}
		addrs[n.Name] = election.InternalIPs(n)
	}
	x.mu.Lock()
	x.macs, x.addrs = macs, addrs
	x.mu.Unlock()
}

// HasMAC reports whether mac belongs to an interface of one of the nodes.
func (x *Index) HasMAC(mac net.HardwareAddr) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	return x.macs[string(mac)]
}

// AdmitMember accepts a gossip member only from an InternalIP of the Node it
// names: holding the key does not let one node speak for another, or count
// twice.
func (x *Index) AdmitMember(node string, addr netip.Addr) error {
	x.mu.RLock()
	ips, known := x.addrs[node]
	x.mu.RUnlock()
	switch {
	case !known:
		if x.Unknown != nil {
			x.Unknown(node)
		}
		return fmt.Errorf("no Node %s (yet)", node)
	case !slices.Contains(ips, addr):
		return fmt.Errorf("Node %s has InternalIPs %v, not %s", node, ips, addr)
	}
	return nil
}

// AllIn reports whether every node the index knows (this one, those with a
// view, those whose agents publish none) has a member in members: whether
// this agent counts every agent it could.
func (x *Index) AllIn(members map[string]membership.State) bool {
	x.mu.RLock()
	defer x.mu.RUnlock()
	for name := range x.addrs {
		if _, in := members[name]; !in {
			return false
		}
	}
	return true
}
