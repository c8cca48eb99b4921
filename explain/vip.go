package explain

import (
	"fmt"
	"net/netip"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/ledger"
)

// vip is steps 2 to 5 for addr, with the election run over l.
func (o *Observed) vip(addr netip.Addr, l liveness) VIP {
	v := VIP{Address: addr.String()}
	ip := o.ledger(addr)
	if ip == nil {
		v.Ledger.Reason = "no IP object holds the address: nothing allocated it, so no agent carries it"
		return v
	}
	holders := o.holders(ip)
	v.Ledger = ledgerCheck(ip, holders)
	v.Group = ip.Labels[paasv1.IPGroupLabel]
	group := o.group(v.Group)
	if group == nil {
		v.Election.Reason = fmt.Sprintf("IPGroup %s does not exist: nothing says how to announce the address", v.Group)
		return v
	}
	mode := election.ModeOf(group)
	v.Mode = string(mode)
	if mode == paasv1.AnnounceNone {
		v.Election.Check = Check{OK: true, Reason: "announce.mode None: the network routes the segment to the nodes, no node is elected"}
	} else if c, ok := o.candidacy(group, ip, holders); ok {
		v.Election = o.elect(addr, mode, c, l)
	} else {
		v.Election.Reason = fmt.Sprintf("IPGroup %s's announce.nodeSelector does not parse: it selects no node", group.Name)
	}
	v.DataPath = o.dataPath(addr, holders)
	v.Announcement = o.announcement(addr, ip, mode, v.Election)
	v.History = historyCheck(ip)
	return v
}

// ledgerCheck is the address's IP object: who holds it, under which key.
func ledgerCheck(ip *paasv1.IP, holders []*corev1.Service) Ledger {
	l := Ledger{Object: ip.Name, SharingKey: ip.Spec.SharingKey}
	for _, h := range ledger.Holders(ip) {
		l.Holders = append(l.Holders, h.Namespace+"/"+h.Name)
	}
	switch {
	case ip.Reserved():
		l.Reason = "reserved by " + ip.Spec.ReservedBy + ": no Service may hold it"
	case len(holders) == 0:
		l.Reason = "names no Service that exists with the uid it names: the operator releases it"
	default:
		l.Check = Check{OK: true, Reason: "IP " + ip.Name + " held by " + strings.Join(l.Holders, ", ")}
		if l.SharingKey != "" {
			l.Reason += ", sharing key " + l.SharingKey
		}
	}
	return l
}

// historyCheck is the address's last ownership changes (status.history).
func historyCheck(ip *paasv1.IP) History {
	h := History{Check: Check{OK: true}, Entries: ip.Status.History}
	if len(h.Entries) == 0 {
		h.Reason = "no move recorded"
		return h
	}
	last := h.Entries[len(h.Entries)-1]
	h.Reason = fmt.Sprintf("%d move(s), the last %s (%s) at %s", len(h.Entries), move(last), last.Cause,
		last.At.UTC().Format(time.RFC3339))
	return h
}

// move spells a history entry's change: a move of an L2 address from one
// node to another, or a node joining or leaving a BGP address's advertisers.
func move(f paasv1.Failover) string {
	switch {
	case f.From == "":
		return f.To + " joined"
	case f.To == "":
		return f.From + " left"
	default:
		return f.From + " -> " + f.To
	}
}

// gap spells a failover's measured gap.
func gap(f paasv1.Failover) string {
	if f.GapMilliseconds == nil {
		return "gap not measured"
	}
	return fmt.Sprintf("gap %dms", *f.GapMilliseconds)
}
