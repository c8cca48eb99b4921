package returnpath

import (
	"cmp"
	"net/netip"
	"slices"

	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// The marks and tables this package owns. Slot n (1..MaxPaths) is mark n<<MarkShift and table
// TableBase+n. kube-proxy uses mark bits 14 and 15 and the agent's masquerade bit defaults to
// 21: bits 24-27 are clear of both.
const (
	MarkShift        = 24
	MarkMask  uint32 = 0xf << MarkShift
	MaxPaths         = 15
	TableBase        = 5300
)

// Interface is one of the node's interfaces as the plan needs it.
type Interface struct {
	Name  string
	Index int
	// Prefixes are its addresses with their subnets (192.0.2.11/24).
	Prefixes []netip.Prefix
	// Gateways are the routers the main table reaches by this interface, per family: the
	// gateway of a default route by it first, else of any route by it.
	Gateways map[dataplane.Family]netip.Addr
	// Default holds the families whose main-table default route leaves by this interface:
	// their replies already go back this way.
	Default map[dataplane.Family]bool
}

// Group is a VIP group as the plan needs it.
type Group struct {
	Name string
	// Prefixes cover the group's addresses.
	Prefixes []netip.Prefix
	// Interfaces are the interfaces its VIPs arrive on (announce.interfaces); empty: those
	// with a subnet overlapping the group.
	Interfaces []string
	// Gateways are announce.gateway, per family.
	Gateways map[dataplane.Family]netip.Addr
}

// Path is the way back of one interface.
type Path struct {
	Interface string
	Index     int
	Mark      uint32
	Table     int
	// Destinations are the group prefixes whose connections arriving here are marked.
	Destinations []netip.Prefix
	// Gateways are the routers of the table's default routes, per family.
	Gateways map[dataplane.Family]netip.Addr
}

// Missing is a group reachable on an interface with no router known to send its replies
// back that way, for one family: they leave by the default route.
type Missing struct {
	Group, Interface string
	Family           dataplane.Family
}

// Plan is what the node should hold.
type Plan struct {
	Paths   []Path
	Missing []Missing
}

// Decide plans the ways back: one Path per interface that carries a group of a family whose
// default route leaves by another interface (none when the node has no default route), with the group's gateway (when on that
// interface's network) or else the one the interface's routes name. Interfaces are taken in
// name order; when two groups on one interface name different gateways of a family, the
// first group by name wins. Beyond MaxPaths interfaces, the rest are Missing.
func Decide(ifaces []Interface, groups []Group) Plan {
	ifaces = slices.SortedFunc(slices.Values(ifaces), func(a, b Interface) int { return cmp.Compare(a.Name, b.Name) })
	groups = slices.SortedFunc(slices.Values(groups), func(a, b Group) int { return cmp.Compare(a.Name, b.Name) })
	// Without a default route of a family, replies to off-link clients have no way out at
	// all, and those to on-link ones leave by the right interface already.
	elsewhere := map[dataplane.Family]bool{}
	for _, ifi := range ifaces {
		for fam, ok := range ifi.Default {
			elsewhere[fam] = elsewhere[fam] || ok
		}
	}
	var plan Plan
	for _, ifi := range ifaces {
		path := Path{Interface: ifi.Name, Index: ifi.Index, Gateways: map[dataplane.Family]netip.Addr{}}
		var missing []Missing
		for _, g := range groups {
			if !carries(ifi, g) {
				continue
			}
			for _, p := range g.Prefixes {
				fam := familyOf(p.Addr())
				if ifi.Default[fam] || !elsewhere[fam] {
					continue
				}
				gw, ok := path.Gateways[fam]
				if !ok {
					gw = gatewayOn(ifi, g, fam)
				}
				if !gw.IsValid() {
					missing = appendMissing(missing, Missing{Group: g.Name, Interface: ifi.Name, Family: fam})
					continue
				}
				path.Gateways[fam] = gw
				path.Destinations = append(path.Destinations, p.Masked())
			}
		}
		if len(path.Destinations) > 0 && len(plan.Paths) >= MaxPaths {
			for _, d := range path.Destinations {
				missing = appendMissing(missing, Missing{Group: groupOf(groups, d), Interface: ifi.Name, Family: familyOf(d.Addr())})
			}
		} else if len(path.Destinations) > 0 {
			slot := len(plan.Paths) + 1
			path.Mark, path.Table = uint32(slot)<<MarkShift, TableBase+slot
			plan.Paths = append(plan.Paths, path)
		}
		plan.Missing = append(plan.Missing, missing...)
	}
	return plan
}

// carries reports whether g's VIPs arrive on ifi.
func carries(ifi Interface, g Group) bool {
	if len(g.Interfaces) > 0 {
		return slices.Contains(g.Interfaces, ifi.Name)
	}
	for _, gp := range g.Prefixes {
		for _, ip := range ifi.Prefixes {
			if gp.Overlaps(ip.Masked()) {
				return true
			}
		}
	}
	return false
}

// gatewayOn is g's gateway of fam when ifi reaches it directly (on one of its subnets, or
// IPv6 link-local), else the one ifi's routes name; the zero Addr when neither.
func gatewayOn(ifi Interface, g Group, fam dataplane.Family) netip.Addr {
	if gw := g.Gateways[fam]; gw.IsValid() {
		if gw.IsLinkLocalUnicast() && fam == dataplane.IPv6 {
			return gw
		}
		for _, p := range ifi.Prefixes {
			if p.Masked().Contains(gw) {
				return gw
			}
		}
	}
	return ifi.Gateways[fam]
}

func appendMissing(ms []Missing, m Missing) []Missing {
	if slices.Contains(ms, m) {
		return ms
	}
	return append(ms, m)
}

// groupOf names the first group holding prefix d.
func groupOf(groups []Group, d netip.Prefix) string {
	for _, g := range groups {
		if slices.ContainsFunc(g.Prefixes, func(p netip.Prefix) bool { return p.Masked() == d }) {
			return g.Name
		}
	}
	return ""
}

func familyOf(a netip.Addr) dataplane.Family {
	if a.Unmap().Is4() {
		return dataplane.IPv4
	}
	return dataplane.IPv6
}

// Marks are the data planes' side of the plan: what they mark, and with which value.
func (p Plan) Marks() []dataplane.ReturnMark {
	var out []dataplane.ReturnMark
	for _, path := range p.Paths {
		out = append(out, dataplane.ReturnMark{Interface: path.Interface, Mark: path.Mark, Mask: MarkMask, Destinations: path.Destinations})
	}
	return out
}
