package explain

import (
	"fmt"
	"net/netip"
	"slices"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// liveness is the agents' view of each other that the election runs on.
type liveness struct {
	// alive are the alive agents' nodes, as the election sees them.
	alive []election.Node
	// from names the agent whose view it is ("" when no agent answered
	// and every node with an agent is taken as alive).
	from string
}

// liveness is the view of the first agent (by node name) that answered:
// every agent runs the election on its own view, and they agree while the
// gossip does. Without any answer, every node with an agent counts as alive.
func (o *Observed) liveness() liveness {
	var names []string
	for n := range o.Facts {
		names = append(names, n)
	}
	sort.Strings(names)
	var l liveness
	policy := election.OnCordonHandover
	members := map[string]bool{}
	if len(names) > 0 {
		f := o.Facts[names[0]]
		l.from, members = f.Node, f.Alive
		if p, err := election.ParseOnCordon(f.OnCordon); err == nil {
			policy = p
		}
	} else {
		for _, n := range o.agentNodes() {
			members[n.Name] = false
		}
	}
	for _, n := range o.agentNodes() {
		draining, ok := members[n.Name]
		if !ok || !n.DeletionTimestamp.IsZero() {
			continue
		}
		en := policy.NodeOf(n)
		en.Draining = draining
		l.alive = append(l.alive, en)
	}
	return l
}

// candidacy is what vip asks of the nodes that carry it: its group's, joined
// over its holders (for each Local one, a ready local endpoint), as every
// agent computes it; ok is false when its group is not announced by agents.
func (o *Observed) candidacy(group *paasv1.IPGroup, ip *paasv1.IP, holders []*corev1.Service) (election.Candidacy, bool) {
	c, ok := election.CandidacyOfLedger(group, ip)
	if !ok {
		return c, false
	}
	for _, svc := range holders {
		if svc.Spec.ExternalTrafficPolicy != corev1.ServiceExternalTrafficPolicyLocal {
			continue
		}
		local := map[string]bool{}
		for _, s := range o.slicesOf(svc) {
			for _, e := range s.Endpoints {
				if (e.Conditions.Ready == nil || *e.Conditions.Ready) && e.NodeName != nil {
					local[*e.NodeName] = true
				}
			}
		}
		if c.LocalNodes != nil {
			prev := c.LocalNodes
			c.LocalNodes = map[string]bool{}
			for n := range local {
				if prev[n] {
					c.LocalNodes[n] = true
				}
			}
			continue
		}
		c.LocalNodes = local
	}
	return c, true
}

// elect runs the election for vip of mode over l, and says for every node
// that runs an agent whether it was chosen and why not.
func (o *Observed) elect(vip netip.Addr, mode paasv1.AnnounceMode, c election.Candidacy, l liveness) Election {
	var e Election
	if mode == paasv1.AnnounceBGP {
		e.Advertisers = election.Advertisers(vip, c, l.alive)
	} else {
		e.Owner, e.Interface, _ = election.Owner(vip, c, l.alive)
	}
	for _, n := range o.agentNodes() {
		e.Nodes = append(e.Nodes, o.candidate(n, vip, mode, c, l, e))
	}
	switch {
	case mode == paasv1.AnnounceBGP && len(e.Advertisers) > 0:
		e.Check = Check{OK: true, Reason: "advertised by " + strings.Join(e.Advertisers, ", ")}
	case e.Owner != "":
		e.Check = Check{OK: true, Reason: fmt.Sprintf("owner %s (%s)", e.Owner, e.Interface)}
	default:
		e.Check = Check{Reason: "no node may carry it: see each node's reason below"}
	}
	return e
}

// candidate is node n in the election of vip.
func (o *Observed) candidate(n *corev1.Node, vip netip.Addr, mode paasv1.AnnounceMode, c election.Candidacy, l liveness, e Election) Candidate {
	out := Candidate{Node: n.Name}
	i := slices.IndexFunc(l.alive, func(a election.Node) bool { return a.Name == n.Name })
	if i < 0 {
		out.Reason = "its agent is not alive in the gossip"
		if l.from != "" {
			out.Reason += " (as " + l.from + "'s agent sees it)"
		}
		if notReady(n) {
			out.Reason += "; the Node is NotReady"
		}
		return out
	}
	en := l.alive[i]
	if mode == paasv1.AnnounceBGP {
		why := election.NotAllowed(en, c)
		if why == "" && election.Claims(en, vip, false) {
			why = election.RefusedClaims
		}
		out.Eligible, out.Reason = why == "", string(why)
		out.Chosen = slices.Contains(e.Advertisers, n.Name)
		return out
	}
	iface, why := election.NotEligible(en, vip, c)
	out.Eligible, out.Reason = why == "", string(why)
	out.Chosen = n.Name == e.Owner
	switch {
	case !out.Eligible || out.Chosen:
	case c.Preferred == e.Owner:
		out.Reason = fmt.Sprintf("eligible (%s), but the address was adopted from %s, which keeps it while eligible", iface, e.Owner)
	default:
		out.Reason = fmt.Sprintf("eligible (%s), but the rendezvous hash prefers %s", iface, e.Owner)
	}
	return out
}

// notReady reports whether n's kubelet says it is not Ready (a Node with no
// Ready condition says nothing).
func notReady(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status != corev1.ConditionTrue
		}
	}
	return false
}
