package trust

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// View is what RefusalOf decides from, read once per pass (Read).
type View struct {
	// Holders maps each address asked about to the uids of the Services its
	// ledger object names: spec.owner, and spec.sharedWith when it is shared
	// (absent: no ledger object, or one naming nobody).
	Holders map[netip.Addr][]types.UID
	// Reserved maps the addresses whose ledger object the operator marked
	// reserved (spec.reservedBy: a Node or a CIDR of the cluster came to hold
	// them after they were allocated) to what holds them.
	Reserved map[netip.Addr]string
	// NodeAddrs maps this node's addresses (its Node's status.addresses) to
	// the Node. Another Node's are not among them: a Node may list an address
	// a Service holds, and what a node says about itself may cost only that
	// node. The operator names it on the address's ledger object, and the
	// election never picks it (election.Claims); the other nodes go on
	// carrying the address. A free address a Node lists is never allocated.
	NodeAddrs map[netip.Addr]string
	// Local maps this node's own addresses, on any interface, to the
	// interface.
	Local map[netip.Addr]string
	// Keepalived are the addresses of legacy VirtualIPs being migrated:
	// keepalived put them on its node's interface and keeps them there until
	// the cutover ends, while the new path must already carry them.
	Keepalived map[netip.Addr]bool
	// AwaitingDataPath are the addresses whose ledger object the operator
	// marked spec.awaitingDataPath: adopted from another load balancer's
	// status, which kube-proxy forwards (ipMode VIP) until the operator writes
	// Proxy, and that only once the agents carry them (package proxy).
	AwaitingDataPath map[netip.Addr]bool
	// Groups maps each address with a ledger object to the IPGroup it was allocated from.
	Groups map[netip.Addr]string
	// NodeIPs are the InternalIPs of every Node the agent reads (Read only; ReadWith leaves
	// it nil): where a steered flow is sent to reach its serving node.
	NodeIPs map[string][]netip.Addr
}

// Refusal is why an agent leaves one address of a Service alone, or (VIP
// zero) admits nobody to all of them.
type Refusal struct {
	VIP    netip.Addr
	Reason string // a Reason* of api/v1 (ConditionProgrammed)
	Detail string
}

// Local reports whether only this node refuses: the other agents may carry
// the address, so the refusal is this node's Event, not the shared condition.
func (r Refusal) Local() bool {
	return r.Reason == paasv1.ReasonLocalAddress || r.Reason == paasv1.ReasonNodeAddress
}

func (r Refusal) String() string {
	if !r.VIP.IsValid() {
		return r.Detail
	}
	return r.VIP.String() + " " + r.Detail
}

// RefusalOf says why vip of svc must be neither programmed nor announced by
// this node; refused is false when it may carry it. A Node's address comes first: it is
// the one that cuts a node off.
func (v View) RefusalOf(svc *corev1.Service, vip netip.Addr) (r Refusal, refused bool) {
	vip = vip.Unmap()
	r.VIP = vip
	if node, ok := v.NodeAddrs[vip]; ok {
		r.Reason, r.Detail = paasv1.ReasonNodeAddress, fmt.Sprintf("is an address of this node, Node %s (status.addresses): its agent neither programs nor announces it, the other nodes carry it; remove the address from the node, or give the Service another one", node)
		return r, true
	}
	if ifc, ok := v.Local[vip]; ok && !v.Keepalived[vip] {
		r.Reason, r.Detail = paasv1.ReasonLocalAddress, fmt.Sprintf("is on interface %s of this node: its agent neither programs nor announces it; remove the address from the interface, or give the Service another one", ifc)
		return r, true
	}
	if by, ok := v.Reserved[vip]; ok {
		r.Reason, r.Detail = paasv1.ReasonReserved, fmt.Sprintf("is reserved in the cluster (%s) since it was allocated: the Service keeps it (condition %s) but no agent programs or announces it until an admin decides; give the Service another address, or free the address in the cluster", by, paasv1.ConditionAddressConflict)
		return r, true
	}
	if !slices.Contains(v.Holders[vip], svc.UID) || svc.UID == "" {
		r.Reason, r.Detail = paasv1.ReasonNotInLedger, fmt.Sprintf("is in the status of Service %s/%s but the ledger (IP object %s) does not give it to this Service: the agents program only what the operator allocated; remove it from the status, or let the operator allocate it", svc.Namespace, svc.Name, paasv1.IPObjectName(vip))
		return r, true
	}
	return r, false
}

// NodeAddresses maps every address of Node self, among nodes, to its name
// (View.NodeAddrs). Only addresses count (Hostname and DNS entries are
// skipped).
func NodeAddresses(nodes []corev1.Node, self string) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for i := range nodes {
		n := &nodes[i]
		if n.Name != self {
			continue
		}
		for _, a := range n.Status.Addresses {
			if addr, err := netip.ParseAddr(strings.TrimSpace(a.Address)); err == nil {
				out[addr.Unmap().WithZone("")] = n.Name
			}
		}
	}
	return out
}

// migratingAddresses are the addresses of the legacy VirtualIPs whose
// migration was requested (see View.Keepalived).
func migratingAddresses(vips []paasv1.VirtualIP) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for i := range vips {
		if addr, ok := vips[i].Addr(); ok && vips[i].MigrationRequested() {
			out[addr] = true
		}
	}
	return out
}
