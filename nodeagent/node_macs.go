package nodeagent

import (
	"net"
	"sync"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// nodeMACs is the set of MACs of the cluster's nodes' interfaces, from their
// interface annotations. Every announce pass rebuilds it from the Nodes it
// lists (a change of any Node triggers a pass), so a claim heard on the wire
// costs one map lookup, never a list of the Nodes.
type nodeMACs struct {
	mu  sync.RWMutex
	set map[string]bool
}

func (m *nodeMACs) update(nodes []corev1.Node) {
	set := map[string]bool{}
	for i := range nodes {
		for _, ifc := range paasv1.ParseNodeInterfaces(nodes[i].Annotations[paasv1.NodeInterfacesAnnotation]) {
			if mac, err := net.ParseMAC(ifc.MAC); err == nil {
				set[string(mac)] = true
			}
		}
	}
	m.mu.Lock()
	m.set = set
	m.mu.Unlock()
}

// has reports whether mac belongs to an interface of one of the nodes.
func (m *nodeMACs) has(mac net.HardwareAddr) bool {
	m.mu.RLock()
	defer m.mu.RUnlock()
	return m.set[string(mac)]
}
