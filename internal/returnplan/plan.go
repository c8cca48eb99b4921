package returnplan

import (
	"cmp"
	"fmt"
	"math"
	"net/netip"
	"slices"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/allocator/k8salloc"
)

// The marks and routing tables of the ways back, which the agent owns, where DefaultLayout
// puts them. Slot n (1..MaxPaths) is mark n<<MarkShift and table TableBase+n. kube-proxy uses
// mark bits 14 and 15 and the agent's masquerade bit defaults to 21: bits 24-27 are clear of
// both. Calico's and Cilium's marks may not be: a Layout moves them (agent flags
// --return-mark-shift, --return-table-base).
const (
	MarkShift        = 24
	MarkMask  uint32 = 0xf << MarkShift
	MaxPaths         = 15
	TableBase        = 5300
)

// Layout is where the ways back live: the four mark bits from MarkShift, and the tables
// TableBase+1 to TableBase+MaxPaths (TableBase itself holds the agent's record of the
// interfaces whose src_valid_mark it turned on).
type Layout struct {
	MarkShift uint
	TableBase int
}

// DefaultLayout is bits 24-27 and tables 5300-5315.
var DefaultLayout = Layout{MarkShift: MarkShift, TableBase: TableBase}

// MarkMask is the four bits of l's marks.
func (l Layout) MarkMask() uint32 { return 0xf << l.MarkShift }

// OwnTable reports whether t is one of l's path tables.
func (l Layout) OwnTable(t int) bool { return t > l.TableBase && t <= l.TableBase+MaxPaths }

// KubeProxyMarks are the packet mark bits kube-proxy uses (masquerade 14, drop 15).
const KubeProxyMarks uint32 = 1<<14 | 1<<15

// Validate says what is wrong with l on a node whose agent masquerades with masqueradeBit:
// marks out of the 32 bits or on kube-proxy's or that bit, tables on the kernel's own
// (0, 253-255) or beyond 32 bits.
func (l Layout) Validate(masqueradeBit int) error {
	if l.MarkShift > 28 {
		return fmt.Errorf("return path marks from bit %d: the four bits must end by bit 31 (shift 0 to 28)", l.MarkShift)
	}
	if m := l.MarkMask() & KubeProxyMarks; m != 0 {
		return fmt.Errorf("return path marks %#x overlap kube-proxy's mark bits 14 and 15 (%#x)", l.MarkMask(), KubeProxyMarks)
	}
	if masqueradeBit >= 0 && masqueradeBit < 32 && l.MarkMask()&(1<<uint(masqueradeBit)) != 0 {
		return fmt.Errorf("return path marks %#x hold the masquerade bit %d", l.MarkMask(), masqueradeBit)
	}
	first, last := l.TableBase, l.TableBase+MaxPaths
	if first < 1 || last > math.MaxUint32 || (first <= 255 && last >= 253) {
		return fmt.Errorf("return path tables %d-%d: want a range of %d tables within 1-%d clear of the kernel's 253-255", first, last, MaxPaths+1, uint32(math.MaxUint32))
	}
	return nil
}

// Interface is one of the node's interfaces as the plan needs it.
type Interface struct {
	Name  string
	Index int
	// Prefixes are its addresses with their subnets (192.0.2.11/24).
	Prefixes []netip.Prefix
	// Gateways are the routers the main table reaches by this interface, per family: the
	// gateway of a default route by it first, else of any route by it.
	Gateways map[allocator.Family]netip.Addr
	// Default holds the families whose main-table default route leaves by this interface:
	// their replies already go back this way.
	Default map[allocator.Family]bool
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
	Gateways map[allocator.Family]netip.Addr
	// Peers are the addresses of the BGP peers a BGP group is advertised to: an interface
	// on a peer's subnet carries the group, and the peer is its router back.
	Peers []netip.Addr
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
	Gateways map[allocator.Family]netip.Addr
}

// Missing is a group reachable on an interface with no router known to send its replies
// back that way, for one family: they leave by the default route.
type Missing struct {
	Group, Interface string
	Family           allocator.Family
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
	return DefaultLayout.Decide(ifaces, groups)
}

// Decide is the plan with l's marks and tables.
func (l Layout) Decide(ifaces []Interface, groups []Group) Plan {
	ifaces = slices.SortedFunc(slices.Values(ifaces), func(a, b Interface) int { return cmp.Compare(a.Name, b.Name) })
	groups = slices.SortedFunc(slices.Values(groups), func(a, b Group) int { return cmp.Compare(a.Name, b.Name) })
	// Without a default route of a family, replies to off-link clients have no way out at
	// all, and those to on-link ones leave by the right interface already.
	elsewhere := map[allocator.Family]bool{}
	for _, ifi := range ifaces {
		for fam, ok := range ifi.Default {
			elsewhere[fam] = elsewhere[fam] || ok
		}
	}
	var plan Plan
	for _, ifi := range ifaces {
		path := Path{Interface: ifi.Name, Index: ifi.Index, Gateways: map[allocator.Family]netip.Addr{}}
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
			path.Mark, path.Table = uint32(slot)<<l.MarkShift, l.TableBase+slot
			plan.Paths = append(plan.Paths, path)
		}
		plan.Missing = append(plan.Missing, missing...)
	}
	return plan
}

// carries reports whether g's VIPs arrive on ifi: it is named in announce.interfaces, or
// else one of its subnets overlaps the group or holds a BGP peer of the group.
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
	return slices.ContainsFunc(g.Peers, func(p netip.Addr) bool { return onLink(ifi, p) })
}

// gatewayOn is the router of fam back from ifi: g's gateway when ifi reaches it directly,
// else a BGP peer of g on ifi's subnets (the router that sends the VIPs' traffic there),
// else the one ifi's routes name; the zero Addr when none.
func gatewayOn(ifi Interface, g Group, fam allocator.Family) netip.Addr {
	if gw := g.Gateways[fam]; gw.IsValid() && onLink(ifi, gw) {
		return gw
	}
	for _, p := range g.Peers {
		if familyOf(p) == fam && onLink(ifi, p) {
			return p
		}
	}
	return ifi.Gateways[fam]
}

// onLink reports whether ifi reaches a directly: on one of its subnets, or IPv6 link-local.
func onLink(ifi Interface, a netip.Addr) bool {
	if a.Is6() && a.IsLinkLocalUnicast() {
		return true
	}
	return slices.ContainsFunc(ifi.Prefixes, func(p netip.Prefix) bool { return p.Masked().Contains(a) })
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

func familyOf(a netip.Addr) allocator.Family {
	if a.Unmap().Is4() {
		return allocator.IPv4
	}
	return allocator.IPv6
}

// GroupOf reads an IPGroup, with the BGPPeers that exist, as the plan needs it; false for one that does not parse (the API
// server validated it: a schema older than this code).
func GroupOf(g *paasv1.IPGroup, peers []paasv1.BGPPeer) (Group, bool) {
	parsed, err := k8salloc.Group(g)
	if err != nil {
		return Group{}, false
	}
	out := Group{Name: g.Name, Prefixes: parsed.Parts(), Gateways: map[allocator.Family]netip.Addr{}}
	if a := g.Spec.Announce; a != nil {
		out.Interfaces = a.Interfaces
		if a.Mode == paasv1.AnnounceBGP {
			out.Peers = peersOf(a.BGP, peers)
		}
		if gw := a.Gateway; gw != nil {
			if ip, err := netip.ParseAddr(gw.IPv4); err == nil && ip.Is4() {
				out.Gateways[allocator.IPv4] = ip
			}
			if ip, err := netip.ParseAddr(gw.IPv6); err == nil && ip.Is6() {
				out.Gateways[allocator.IPv6] = ip
			}
		}
	}
	return out, true
}

// peersOf are the addresses of the peers a BGP group is advertised to: those bgp names,
// or all.
func peersOf(bgp *paasv1.BGPAnnounce, peers []paasv1.BGPPeer) []netip.Addr {
	var out []netip.Addr
	for _, p := range peers {
		if bgp != nil && len(bgp.Peers) > 0 && !slices.Contains(bgp.Peers, p.Name) {
			continue
		}
		if a, err := netip.ParseAddr(p.Spec.PeerAddress); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}

// Published reads the interfaces a node's agent published (paasv1.NodeInterfacesAnnotation)
// as the plan needs them: what the operator knows of the node.
func Published(ifaces []paasv1.NodeInterface) []Interface {
	var out []Interface
	for _, p := range ifaces {
		ifi := Interface{Name: p.Name, Prefixes: p.Addrs, Gateways: map[allocator.Family]netip.Addr{}, Default: map[allocator.Family]bool{}}
		for _, r := range p.Routers {
			if fam := familyOf(r); !ifi.Gateways[fam].IsValid() {
				ifi.Gateways[fam] = r.Unmap()
			}
		}
		for _, f := range p.Default {
			ifi.Default[allocator.Family(f)] = true
		}
		out = append(out, ifi)
	}
	return out
}
