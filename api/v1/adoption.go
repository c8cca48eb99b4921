package v1

import (
	"slices"
	"time"
)

// AdoptedAnnotation on a ledger IP object records when the operator adopted its address from a
// Service's status that another load balancer (MetalLB) wrote (RFC 3339). That load balancer's
// speaker may still answer ARP/NDP for the address while the agents take it over: the hand-over
// of docs/migration.md "From MetalLB", as keepalived's is for a migrating VirtualIP.
const AdoptedAnnotation = "vip.paas.org/adopted"

// AdoptionHandOver is how long after the adoption the agents expect the other load balancer's
// speaker to answer for the address too, and report no conflict: the time to remove it. A
// speaker still answering after that is the conflict it then is.
const AdoptionHandOver = 15 * time.Minute

// HandOverExpected reports whether another load balancer may still answer for ip's address at
// now: its address was adopted less than AdoptionHandOver ago. The layer-2 split-brain
// detector must not raise an alarm for such an address.
func (ip *IP) HandOverExpected(now time.Time) bool {
	at, err := time.Parse(time.RFC3339, ip.Annotations[AdoptedAnnotation])
	return err == nil && !now.Before(at) && now.Sub(at) < AdoptionHandOver
}

// ProxyReady reports whether the operator may write ipMode Proxy for ip's address, which makes
// kube-proxy let go of it: always, unless the address awaits the agents' data path
// (spec.awaitingDataPath); then only once the nodes that announce it (L2: its owner; BGP: every
// advertiser, status.announcedBy) report it programmed (status.programmedBy). A report counts
// only from a node that announces the address: the agents hold each one to its own node's
// entry (config/admission/agent_status_entries.yaml), and a node that no announcement sends
// traffic to says nothing about the traffic. With announce.mode None no node announces, and
// any one node's report stands for the rest, which program the address from the same event.
func (ip *IP) ProxyReady(mode AnnounceMode) bool {
	if !ip.Spec.AwaitingDataPath {
		return true
	}
	if mode == AnnounceNone {
		return len(ip.Status.ProgrammedBy) > 0
	}
	if len(ip.Status.AnnouncedBy) == 0 {
		return false
	}
	for _, n := range ip.Status.AnnouncedBy {
		if !slices.Contains(ip.Status.ProgrammedBy, n) {
			return false
		}
	}
	return true
}

// AdoptedNodeLeft reports whether ip's address was adopted from a node (spec.adoptedFromNode)
// that no longer announces it: another node does. The operator then forgets that node, so the
// address stays where the election puts it and does not go back when the node returns.
func (ip *IP) AdoptedNodeLeft() bool {
	n := ip.Spec.AdoptedFromNode
	return n != "" && len(ip.Status.AnnouncedBy) > 0 && !slices.Contains(ip.Status.AnnouncedBy, n)
}
