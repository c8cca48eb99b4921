package explain

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// announcement is step 4 for addr: whether the ledger, and the agents'
// speakers, name the node(s) the election chose, and no one else claims it.
func (o *Observed) announcement(addr netip.Addr, ip *paasv1.IP, mode paasv1.AnnounceMode, e Election) Announcement {
	a := Announcement{AnnouncedBy: ip.Status.AnnouncedBy}
	if c := meta.FindStatusCondition(ip.Status.Conditions, paasv1.IPConditionConflict); c != nil && c.Status == "True" {
		a.Conflict = "since " + c.LastTransitionTime.UTC().Format(time.RFC3339) + ": " + c.Message
	}
	switch mode {
	case paasv1.AnnounceNone:
		a.Check = Check{OK: true, Reason: "not announced by the agents (announce.mode None)"}
		return a
	case paasv1.AnnounceBGP:
		a.Sessions = o.sessions(addr, e.Advertisers)
		a.Check = bgpAnnounced(a, e)
	default:
		for _, n := range sortedKeys(o.Facts) {
			if _, ok := o.Facts[n].Answering[addr.String()]; ok {
				a.Answering = append(a.Answering, n)
			}
			if at, ok := o.Facts[n].Announced[addr.String()]; ok && n == e.Owner {
				a.LastGratuitous = &at
			}
		}
		a.Check = l2Announced(a, e, len(o.Facts) > 0)
	}
	if a.Conflict != "" {
		a.Check = Check{Reason: "conflict: " + a.Conflict}
	}
	return a
}

// l2Announced checks that the owner, and only it, answers and is on the
// ledger; answering is known only when some agent answered (facts).
func l2Announced(a Announcement, e Election, facts bool) Check {
	want := []string{e.Owner}
	switch {
	case e.Owner == "":
		return Check{Reason: "no owner: nobody answers ARP/NDP for it"}
	case !slices.Equal(a.AnnouncedBy, want):
		return Check{Reason: fmt.Sprintf("the ledger names %s as announcer, the election %s: the owner has not claimed it yet (or cannot write)",
			orNone(a.AnnouncedBy), e.Owner)}
	case facts && !slices.Equal(a.Answering, want):
		return Check{Reason: fmt.Sprintf("answered by %s, want %s alone", orNone(a.Answering), e.Owner)}
	}
	return Check{OK: true, Reason: e.Owner + " answers ARP/NDP on " + e.Interface + "; the ledger names it" + lastSent(a)}
}

// lastSent says when the owner's last gratuitous announcement was sent.
func lastSent(a Announcement) string {
	if a.LastGratuitous == nil {
		return ""
	}
	return "; last gratuitous announcement " + a.LastGratuitous.UTC().Format(time.RFC3339)
}

// bgpAnnounced checks that every advertiser has a session up and is on the ledger.
func bgpAnnounced(a Announcement, e Election) Check {
	var down, unsent []string
	for _, n := range e.Advertisers {
		up := slices.ContainsFunc(a.Sessions, func(s Session) bool { return s.Node == n && s.State == bgpEstablished })
		if !up {
			down = append(down, n)
		}
		for _, s := range a.Sessions {
			if s.Node == n && s.State == bgpEstablished && s.Sent != nil && !*s.Sent {
				unsent = append(unsent, n+" to "+s.Peer)
			}
		}
	}
	switch {
	case len(e.Advertisers) == 0:
		return Check{Reason: "no advertiser: no router learns the route"}
	case len(down) > 0:
		return Check{Reason: "no established BGP session on " + strings.Join(down, ", ") + ": see the BGPPeers' status.sessions"}
	case len(unsent) > 0:
		return Check{Reason: "the route is not in the Adj-RIB-Out of " + strings.Join(unsent, ", ") + ": see the agent's log and the IPGroup's announce.bgp.peers"}
	case !slices.Equal(a.AnnouncedBy, e.Advertisers):
		return Check{Reason: fmt.Sprintf("the ledger names %s, the election %s", orNone(a.AnnouncedBy), strings.Join(e.Advertisers, ", "))}
	}
	return Check{OK: true, Reason: "advertised by " + strings.Join(e.Advertisers, ", ") + " with sessions up"}
}

// sessions are the BGP sessions of nodes, from the BGPPeers' status, each
// with whether its node's agent says addr's route was sent on it.
func (o *Observed) sessions(addr netip.Addr, nodes []string) []Session {
	var out []Session
	for _, p := range o.Peers {
		for _, s := range p.Status.Sessions {
			if !slices.Contains(nodes, s.Node) {
				continue
			}
			sess := Session{Peer: p.Name, Node: s.Node, State: s.State, BFD: s.BFD}
			if f := o.Facts[s.Node]; f != nil && f.Advertised != nil {
				sess.Sent = ptr.To(slices.Contains(f.Advertised[p.Name], addr.String()))
			}
			out = append(out, sess)
		}
	}
	return out
}

func orNone(names []string) string {
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// bgpEstablished is the RFC 4271 name of an up session, as the agents write
// it in the BGPPeers' status.sessions.
const bgpEstablished = "Established"
