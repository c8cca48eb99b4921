package ipgroup

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// setAnnounceableCondition says whether any node can announce the group's VIPs
// in L2 mode: one that matches announce.nodeSelector, is not cordoned, and has
// an interface (of announce.interfaces, if set) on one of its parts (segment or
// addresses), as its agent
// published in the Node's interfaces annotation. Groups announced otherwise
// carry no such condition. Which node may carry the VIPs is the agents' own
// rule (internal/election), asked here of every Node over the whole segment.
func setAnnounceableCondition(status *paasv1.IPGroupStatus, group *paasv1.IPGroup, nodes []corev1.Node, peers []paasv1.BGPPeer, onCordon election.OnCordon) {
	an := group.Spec.Announce
	if an != nil && an.Mode == paasv1.AnnounceBGP {
		meta.SetStatusCondition(&status.Conditions, bgpAnnounceable(group, nodes, peers, onCordon))
		return
	}
	if an != nil && an.Mode != "" && an.Mode != paasv1.AnnounceL2 {
		meta.RemoveStatusCondition(&status.Conditions, paasv1.IPGroupAnnounceable)
		return
	}
	parsed, err := k8salloc.Group(group)
	if err != nil {
		meta.RemoveStatusCondition(&status.Conditions, paasv1.IPGroupAnnounceable)
		return // Ready says what is wrong
	}
	parts := parsed.Parts()
	var allowed []string
	if an != nil {
		allowed = an.Interfaces
	}
	selected, able := groupNodes(group, nodes, onCordon, func(n election.Node, c election.Candidacy) bool {
		return slices.ContainsFunc(parts, func(p netip.Prefix) bool {
			_, ok := election.EligibleIn(n, p, c)
			return ok
		})
	})
	c := metav1.Condition{Type: paasv1.IPGroupAnnounceable, ObservedGeneration: group.Generation}
	switch {
	case len(able) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, "NodesAvailable"
		c.Message = fmt.Sprintf("%d node(s) can announce the group's VIPs: %s", len(able), firstNames(able))
	case len(selected) == 0:
		c.Status, c.Reason = metav1.ConditionFalse, "NoNodeSelected"
		c.Message = "no node matches announce.nodeSelector: fix the selector or label the nodes on the segment's network"
	default:
		c.Status, c.Reason = metav1.ConditionFalse, "NoInterfaceOnSegment"
		c.Message = fmt.Sprintf("none of the %d selected node(s) (%s) is schedulable, not labelled %s, with an interface on %s%s: the VIPs would be unreachable; put the group's addresses on the nodes' network, set announce.nodeSelector to the nodes on it, or use announce.mode BGP/None",
			len(selected), firstNames(selected), corev1.LabelNodeExcludeBalancers, group.Spec.DescribeParts(), interfacesNote(allowed))
	}
	meta.SetStatusCondition(&status.Conditions, c)
}

// bgpAnnounceable says whether any node can advertise a BGP group's VIPs:
// one that matches announce.nodeSelector, is not cordoned, and is selected
// by a BGPPeer the group advertises to (announce.bgp.peers, or any).
func bgpAnnounceable(group *paasv1.IPGroup, nodes []corev1.Node, peers []paasv1.BGPPeer, onCordon election.OnCordon) metav1.Condition {
	an := group.Spec.Announce
	c := metav1.Condition{Type: paasv1.IPGroupAnnounceable, ObservedGeneration: group.Generation, Status: metav1.ConditionFalse}
	var named []string
	if an.BGP != nil {
		named = an.BGP.Peers
	}
	var usable []paasv1.BGPPeer
	var missing []string
	for _, name := range named {
		if i := slices.IndexFunc(peers, func(p paasv1.BGPPeer) bool { return p.Name == name }); i >= 0 {
			usable = append(usable, peers[i])
		} else {
			missing = append(missing, name)
		}
	}
	if len(named) == 0 {
		usable = peers
	}
	if len(usable) == 0 {
		c.Reason = "NoBGPPeer"
		c.Message = "no BGPPeer exists to advertise the group's VIPs to: create one"
		if len(missing) > 0 {
			c.Message = fmt.Sprintf("the BGPPeers named in announce.bgp.peers do not exist (%s): create them or fix the names", strings.Join(missing, ", "))
		}
		return c
	}
	selected, able := groupNodes(group, nodes, onCordon, func(n election.Node, c election.Candidacy) bool {
		return election.Allowed(n, c) && n.Agent && slices.ContainsFunc(usable, func(p paasv1.BGPPeer) bool { return election.PeerSelects(&p, n) })
	})
	switch {
	case len(able) > 0:
		c.Status, c.Reason = metav1.ConditionTrue, "NodesAvailable"
		c.Message = fmt.Sprintf("%d node(s) can advertise the group's VIPs by BGP: %s", len(able), firstNames(able))
		if len(missing) > 0 {
			c.Message += fmt.Sprintf("; announce.bgp.peers names BGPPeers that do not exist: %s", strings.Join(missing, ", "))
		}
	case len(selected) == 0:
		c.Reason = "NoNodeSelected"
		c.Message = "no node matches announce.nodeSelector: fix the selector or label the nodes"
	default:
		c.Reason = "NoPeerForNodes"
		c.Message = fmt.Sprintf("none of the %d selected node(s) (%s) is schedulable, not labelled %s, runs an agent and is selected by a BGPPeer the group uses: fix the BGPPeers' nodeSelector or the group's announce.nodeSelector", len(selected), firstNames(selected), corev1.LabelNodeExcludeBalancers)
	}
	return c
}

// groupNodes are the nodes matching the group's announce.nodeSelector, and
// those of them that can carry its VIPs (can, given what the group asks of a
// node; election.Allowed leaves out the cordoned ones, as onCordon says, and
// the excluded ones).
func groupNodes(group *paasv1.IPGroup, nodes []corev1.Node, onCordon election.OnCordon, can func(election.Node, election.Candidacy) bool) (selected, able []string) {
	c, _ := election.CandidacyOf(group) // a bad selector selects no node
	for i := range nodes {
		n := onCordon.NodeOf(&nodes[i])
		if !election.Selects(c, n) {
			continue
		}
		selected = append(selected, n.Name)
		if can(n, c) {
			able = append(able, n.Name)
		}
	}
	return selected, able
}

func interfacesNote(allowed []string) string {
	if len(allowed) == 0 {
		return ""
	}
	return " (announce.interfaces: " + strings.Join(allowed, ", ") + ")"
}

// firstNames lists up to five names, and how many more there are.
func firstNames(names []string) string {
	slices.Sort(names)
	if len(names) <= 5 {
		return strings.Join(names, ", ")
	}
	return fmt.Sprintf("%s and %d more", strings.Join(names[:5], ", "), len(names)-5)
}
