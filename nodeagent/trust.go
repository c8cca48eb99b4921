package nodeagent

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// Which addresses an agent may program and announce. The Service status is
// not the authority: anyone with services/status could write it. An address is
// carried only when the ledger gives it to the Service (by uid), it is no
// Node's address, and it is not on one of this node's own interfaces;
// otherwise the agent leaves it alone and says why (report.go). This file is
// pure; trust_observe.go reads the view from the caches. Both the data plane
// (agent.go) and the announcer decide with refusalOf, so a node never
// announces what it would not forward, nor the reverse.

// trustView is what refusalOf decides from, read once per pass.
type trustView struct {
	// holders maps each address asked about to the uids of the Services its
	// ledger object names: spec.owner, and spec.sharedWith when it is shared
	// (absent: no ledger object, or one naming nobody).
	holders map[netip.Addr][]types.UID
	// reserved maps the addresses whose ledger object the operator marked
	// reserved (spec.reservedBy: a Node or a CIDR of the cluster came to hold
	// them after they were allocated) to what holds them.
	reserved map[netip.Addr]string
	// nodeAddrs maps every address (status.addresses) of the Node objects
	// the agent reads (listNodes: its own, those of agents with no view) to
	// the Node. A NodeView's addresses are not among them: its node's agent
	// writes it, and what a node says may cost only that node. The operator,
	// which reads every Node, marks the other Nodes' addresses reserved.
	nodeAddrs map[netip.Addr]string
	// local maps this node's own addresses, on any interface, to the
	// interface.
	local map[netip.Addr]string
	// keepalived are the addresses of legacy VirtualIPs being migrated:
	// keepalived put them on its node's interface and keeps them there until
	// the cutover ends, while the new path must already carry them.
	keepalived map[netip.Addr]bool
}

// refusal is why an agent leaves one address of a Service alone, or (vip
// zero) admits nobody to all of them.
type refusal struct {
	vip    netip.Addr
	reason string // a Reason* of api/v1 (ConditionProgrammed)
	detail string
}

// local reports whether only this node refuses: the other agents may carry
// the address, so the refusal is this node's Event, not the shared condition.
func (r refusal) local() bool { return r.reason == paasv1.ReasonLocalAddress }

func (r refusal) String() string {
	if !r.vip.IsValid() {
		return r.detail
	}
	return r.vip.String() + " " + r.detail
}

// refusalOf says why vip of svc must be neither programmed nor announced by
// this node; refused is false when it may carry it. A Node's address comes first: it is
// the one that cuts a node off.
func (v trustView) refusalOf(svc *corev1.Service, vip netip.Addr) (r refusal, refused bool) {
	vip = vip.Unmap()
	r.vip = vip
	if node, ok := v.nodeAddrs[vip]; ok {
		r.reason, r.detail = paasv1.ReasonNodeAddress, fmt.Sprintf("is an address of Node %s (status.addresses): no agent programs or announces it; give the Service another address and exclude %s from its IPGroup", node, vip)
		return r, true
	}
	if ifc, ok := v.local[vip]; ok && !v.keepalived[vip] {
		r.reason, r.detail = paasv1.ReasonLocalAddress, fmt.Sprintf("is on interface %s of this node: its agent neither programs nor announces it; remove the address from the interface, or give the Service another one", ifc)
		return r, true
	}
	if by, ok := v.reserved[vip]; ok {
		r.reason, r.detail = paasv1.ReasonReserved, fmt.Sprintf("is reserved in the cluster (%s) since it was allocated: the Service keeps it (condition %s) but no agent programs or announces it until an admin decides; give the Service another address, or free the address in the cluster", by, paasv1.ConditionAddressConflict)
		return r, true
	}
	if !slices.Contains(v.holders[vip], svc.UID) || svc.UID == "" {
		r.reason, r.detail = paasv1.ReasonNotInLedger, fmt.Sprintf("is in the status of Service %s/%s but the ledger (IP object %s) does not give it to this Service: the agents program only what the operator allocated; remove it from the status, or let the operator allocate it", svc.Namespace, svc.Name, paasv1.IPObjectName(vip))
		return r, true
	}
	return r, false
}

// ledgerHolders are the uids of the Services ip names: spec.owner and, for a
// shared address, spec.sharedWith; none for an object naming nobody (a legacy
// or not yet adopted object: the operator adopts it before it shows its
// address with ipMode Proxy).
func ledgerHolders(ip *paasv1.IP) []types.UID {
	if ip == nil {
		return nil
	}
	var out []types.UID
	for _, o := range ip.Holders() {
		if o.UID != "" {
			out = append(out, o.UID)
		}
	}
	return out
}

// nodeAddresses maps every address of every Node but the viewed ones (read
// from a NodeView, listNodes) to the Node's name. Only addresses count
// (Hostname and DNS entries are skipped).
func nodeAddresses(nodes []corev1.Node, viewed map[string]bool) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for i := range nodes {
		if viewed[nodes[i].Name] {
			continue
		}
		for _, a := range nodes[i].Status.Addresses {
			if addr, err := netip.ParseAddr(strings.TrimSpace(a.Address)); err == nil {
				out[addr.Unmap().WithZone("")] = nodes[i].Name
			}
		}
	}
	return out
}

// migratingAddresses are the addresses of the legacy VirtualIPs whose
// migration was requested (see trustView.keepalived).
func migratingAddresses(vips []paasv1.VirtualIP) map[netip.Addr]bool {
	out := map[netip.Addr]bool{}
	for i := range vips {
		if addr, ok := vips[i].Addr(); ok && vips[i].MigrationRequested() {
			out[addr] = true
		}
	}
	return out
}

// programmable keeps in ds (a served Service svc, converted) only the VIPs
// this node may carry, and reports what it refused: each VIP refused, and
// source ranges that do not parse (ds is then Closed: the VIPs stay, to be
// rejected).
func programmable(ds dataplane.Service, svc *corev1.Service, v trustView) (dataplane.Service, serviceReport) {
	report := serviceReport{svc: svc}
	kept := make([]netip.Addr, 0, len(ds.VIPs))
	for _, vip := range ds.VIPs {
		if r, refused := v.refusalOf(svc, vip); refused {
			report.refusals = append(report.refusals, r)
			continue
		}
		kept = append(kept, vip)
	}
	ds.VIPs = kept
	if _, invalid := parseSourceRanges(svc.Spec.LoadBalancerSourceRanges); len(invalid) > 0 && len(kept) > 0 {
		report.refusals = append(report.refusals, refusal{reason: paasv1.ReasonInvalidSourceRanges,
			detail: fmt.Sprintf("spec.loadBalancerSourceRanges %s: not a CIDR as Kubernetes reads one (no leading zeros, no zone, no IPv4-mapped IPv6, a /mask); no client reaches %s until it is fixed or removed",
				quoteAll(invalid), ingress.Join(kept))})
	}
	return ds, report
}

func quoteAll(ss []string) string {
	q := make([]string, 0, len(ss))
	for _, s := range ss {
		q = append(q, fmt.Sprintf("%q", clip(s)))
	}
	return strings.Join(q, ", ")
}

// clip shortens what a user wrote to a length a message can carry: a
// condition message holds at most 32 KiB, an annotation or field much more.
func clip(s string) string {
	const max = 64
	if len(s) <= max {
		return s
	}
	return s[:max] + "..."
}
