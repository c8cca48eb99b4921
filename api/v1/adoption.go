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

// HandOverEnd is when the hand-over of ip's adopted address ends: AdoptionHandOver after its
// adoption; ok is false for an address not adopted (or whose record does not parse), which
// has no hand-over to wait for.
func (ip *IP) HandOverEnd() (end time.Time, ok bool) {
	at, err := time.Parse(time.RFC3339, ip.Annotations[AdoptedAnnotation])
	if err != nil {
		return time.Time{}, false
	}
	return at.Add(AdoptionHandOver), true
}

// ProxyReady reports whether the operator may write ipMode Proxy for ip's address, which makes
// kube-proxy let go of it: always, unless the address awaits the agents' data path
// (spec.awaitingDataPath); then only once the nodes that announce it report it programmed
// (status.programmedBy). On layer 2 that is owner, the node the election gives the address as
// the operator computes it ("" when none): an agent may write itself into announcedBy and
// programmedBy, and an address it was not elected for is not one whose traffic reaches it.
// BGP: every advertiser (status.announcedBy). A report counts only from a node that announces
// the address: the agents hold each one to its own node's entry
// (config/admission/agent_status_entries.yaml), and a node that no announcement sends traffic
// to says nothing about the traffic. With announce.mode None no node announces, and any one
// node's report stands for the rest, which program the address from the same event.
func (ip *IP) ProxyReady(mode AnnounceMode, owner string) bool {
	if !ip.Spec.AwaitingDataPath {
		return true
	}
	switch mode {
	case AnnounceNone:
		return len(ip.Status.ProgrammedBy) > 0
	case AnnounceBGP:
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
	return owner != "" && slices.Contains(ip.Status.AnnouncedBy, owner) && slices.Contains(ip.Status.ProgrammedBy, owner)
}

// AdoptedNodeLeft reports whether ip's address was adopted from a node (spec.adoptedFromNode)
// that the election no longer gives it: owner, the node it elects now as the operator computes
// it (preferring the adopted node while that one may carry the address), is another node, and
// that node announces it. The operator then forgets the adopted node, so the address stays where
// the election puts it and does not go back when the node returns. What announcedBy says alone
// ends nothing: any agent may write itself there and drop the node it replaces.
func (ip *IP) AdoptedNodeLeft(owner string) bool {
	n := ip.Spec.AdoptedFromNode
	return n != "" && owner != "" && owner != n && slices.Contains(ip.Status.AnnouncedBy, owner)
}
