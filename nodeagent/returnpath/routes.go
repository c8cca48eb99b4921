package returnpath

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/vishvananda/netlink"
	"github.com/vishvananda/netlink/nl"
	"golang.org/x/sys/unix"

	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
)

// RulePriority is the first of the policy rules' priorities, before the main table's (32766). At RulePriority a
// marked packet looks in the main table with its default routes suppressed; at
// RulePriority+1, what found nothing there looks in its interface's table.
const RulePriority = 31000

// rulesOf are the two rules of a path with a gateway of family nlFam.
func rulesOf(l returnplan.Layout, p returnplan.Path, nlFam int) []netlink.Rule {
	mask := l.MarkMask()
	main := netlink.NewRule()
	main.Family, main.Priority, main.Mark, main.Mask = nlFam, RulePriority, p.Mark, &mask
	main.Table, main.SuppressPrefixlen = unix.RT_TABLE_MAIN, 0
	own := netlink.NewRule()
	own.Family, own.Priority, own.Mark, own.Mask, own.Table = nlFam, RulePriority+1, p.Mark, &mask, p.Table
	return []netlink.Rule{*main, *own}
}

// ruleKey is what tells two of our rules apart.
type ruleKey struct {
	prio, table, suppress int
	mark                  uint32
}

func keyOf(r netlink.Rule) ruleKey {
	return ruleKey{r.Priority, r.Table, r.SuppressPrefixlen, r.Mark}
}

// ours reports whether r is one of this package's rules: at our priorities, matching a mark
// within l's mask.
func ours(l returnplan.Layout, r netlink.Rule) bool {
	return (r.Priority == RulePriority || r.Priority == RulePriority+1) && r.Mask != nil && *r.Mask == l.MarkMask()
}

var families = []struct {
	fam   allocator.Family
	nlFam int
}{{allocator.IPv4, netlink.FAMILY_V4}, {allocator.IPv6, netlink.FAMILY_V6}}

// Apply makes the node's policy rules and own tables hold exactly plan's paths, and lets the
// reverse-path filter honour the mark on their interfaces. It reads what is there first and
// changes only what differs, so calling it again repairs drift and costs nothing otherwise.
func Apply(plan returnplan.Plan) error { return ApplyIn(returnplan.DefaultLayout, plan) }

// ApplyIn is Apply with l's marks and tables.
func ApplyIn(l returnplan.Layout, plan returnplan.Plan) error {
	var errs []error
	for _, f := range families {
		errs = append(errs, applyRules(l, plan, f.fam, f.nlFam), applyRoutes(l, plan, f.fam, f.nlFam))
	}
	for _, p := range plan.Paths {
		if p.Gateways[allocator.IPv4].IsValid() {
			errs = append(errs, srcValidMark(l, p.Interface, p.Index))
		}
	}
	return errors.Join(errs...)
}

// Cleanup removes every rule and route this package ever wrote in l's marks and tables, and
// turns src_valid_mark off again where it turned it on.
func Cleanup(l returnplan.Layout) error {
	return errors.Join(ApplyIn(l, returnplan.Plan{}), restoreSrcValidMark(l))
}

func applyRules(l returnplan.Layout, plan returnplan.Plan, fam allocator.Family, nlFam int) error {
	want := map[ruleKey]netlink.Rule{}
	for _, p := range plan.Paths {
		if p.Gateways[fam].IsValid() {
			for _, r := range rulesOf(l, p, nlFam) {
				want[keyOf(r)] = r
			}
		}
	}
	have, err := netlink.RuleList(nlFam)
	if err != nil {
		return fmt.Errorf("list %s rules: %w", fam, err)
	}
	var errs []error
	for _, r := range have {
		if !ours(l, r) {
			continue
		}
		if _, ok := want[keyOf(r)]; ok {
			delete(want, keyOf(r))
			continue
		}
		r.Family = nlFam
		if err := netlink.RuleDel(&r); err != nil {
			errs = append(errs, fmt.Errorf("delete %s rule %s: %w", fam, r, err))
		}
	}
	for _, r := range want {
		if err := netlink.RuleAdd(&r); err != nil {
			errs = append(errs, fmt.Errorf("add %s rule %s: %w", fam, r, err))
		}
	}
	return errors.Join(errs...)
}

// applyRoutes makes each own table hold its path's default route of fam, and nothing else.
func applyRoutes(l returnplan.Layout, plan returnplan.Plan, fam allocator.Family, nlFam int) error {
	want := map[int]netlink.Route{}
	for _, p := range plan.Paths {
		if gw := p.Gateways[fam]; gw.IsValid() {
			want[p.Table] = netlink.Route{
				Family: nlFam, Table: p.Table, LinkIndex: p.Index, Dst: defaultDst(fam),
				Gw: net.IP(gw.AsSlice()), Protocol: unix.RTPROT_STATIC,
			}
		}
	}
	have, err := netlink.RouteListFiltered(nlFam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list %s routes: %w", fam, err)
	}
	var errs []error
	for _, r := range have {
		if !l.OwnTable(r.Table) {
			continue
		}
		if w, ok := want[r.Table]; ok && sameRoute(r, w) {
			delete(want, r.Table)
			continue
		}
		if err := netlink.RouteDel(&r); err != nil {
			errs = append(errs, fmt.Errorf("delete %s route %s: %w", fam, r, err))
		}
	}
	for _, r := range want {
		if err := netlink.RouteReplace(&r); err != nil {
			errs = append(errs, fmt.Errorf("add %s route %s: %w", fam, r, err))
		}
	}
	return errors.Join(errs...)
}

func defaultDst(fam allocator.Family) *net.IPNet {
	if fam == allocator.IPv4 {
		return &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(0, 32)}
	}
	return &net.IPNet{IP: net.IPv6zero, Mask: net.CIDRMask(0, 128)}
}

// sameRoute reports whether r, as listed, is the default route w via w's gateway and link.
func sameRoute(r, w netlink.Route) bool {
	isDefault := r.Dst == nil || (r.Dst.IP.IsUnspecified() && func() bool { o, _ := r.Dst.Mask.Size(); return o == 0 }())
	return isDefault && r.LinkIndex == w.LinkIndex && r.Gw.Equal(w.Gw) && len(r.MultiPath) == 0
}

// srcValidMark makes the reverse-path filter of the interface look the request's source up
// with its packet mark, so a strict filter judges it by the interface's own table (the
// request's destination is already the endpoint then, so no rule on it could). It changes
// nothing for packets without a mark. It is set through netlink (RTM_SETLINK,
// IFLA_INET_CONF), as `ip` would, not /proc/sys: that is read-only in the agent's container,
// which has NET_ADMIN but is not privileged. Where it turns it on it leaves a record in the
// kernel, which outlives the agent: a route of that interface in table l.TableBase (no rule
// looks there), so Cleanup, from any process, turns it off again where it was off.
func srcValidMark(l returnplan.Layout, name string, index int) error {
	if b, err := os.ReadFile(filepath.Join("/proc/sys/net/ipv4/conf", filepath.Base(name), "src_valid_mark")); err == nil && len(b) > 0 && b[0] == '1' {
		return nil // reading is allowed, and spares a write every check
	}
	if err := netlink.RouteReplace(srcValidMarkRecord(l, index)); err != nil {
		return fmt.Errorf("record src_valid_mark of interface %s: %w", name, err)
	}
	return setSrcValidMark(index, 1)
}

// srcValidMarkRecord is the record that the agent turned src_valid_mark on for the
// interface index: 0.0.0.0/32 by it in table l.TableBase, the index as its metric.
func srcValidMarkRecord(l returnplan.Layout, index int) *netlink.Route {
	return &netlink.Route{Family: netlink.FAMILY_V4, Table: l.TableBase, LinkIndex: index, Priority: index,
		Dst: &net.IPNet{IP: net.IPv4zero.To4(), Mask: net.CIDRMask(32, 32)}, Scope: netlink.SCOPE_LINK, Protocol: unix.RTPROT_STATIC}
}

// restoreSrcValidMark turns src_valid_mark off on every interface the record in table
// l.TableBase names, and drops the record.
func restoreSrcValidMark(l returnplan.Layout) error {
	have, err := netlink.RouteListFiltered(netlink.FAMILY_V4, &netlink.Route{Table: l.TableBase}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return fmt.Errorf("list the src_valid_mark record (table %d): %w", l.TableBase, err)
	}
	var errs []error
	for _, r := range have {
		if err := setSrcValidMark(r.LinkIndex, 0); err != nil && !errors.Is(err, unix.ENODEV) {
			errs = append(errs, err)
			continue
		}
		if err := netlink.RouteDel(&r); err != nil {
			errs = append(errs, fmt.Errorf("delete the src_valid_mark record of interface %d: %w", r.LinkIndex, err))
		}
	}
	return errors.Join(errs...)
}

// setSrcValidMark sets src_valid_mark of the interface index to v.
func setSrcValidMark(index int, v uint32) error {
	const (
		iflaInetConf        = 1  // IFLA_INET_CONF, in IFLA_AF_SPEC's AF_INET
		ipv4DevconfSrcVmark = 24 // IPV4_DEVCONF_SRC_VMARK
	)
	req := nl.NewNetlinkRequest(unix.RTM_SETLINK, unix.NLM_F_ACK)
	msg := nl.NewIfInfomsg(unix.AF_UNSPEC)
	msg.Index = int32(index)
	req.AddData(msg)
	spec := nl.NewRtAttr(unix.IFLA_AF_SPEC, nil)
	spec.AddRtAttr(unix.AF_INET, nil).AddRtAttr(iflaInetConf, nil).AddRtAttr(ipv4DevconfSrcVmark, nl.Uint32Attr(v))
	req.AddData(spec)
	if _, err := req.Execute(unix.NETLINK_ROUTE, 0); err != nil {
		return fmt.Errorf("set src_valid_mark of interface %d to %d: %w", index, v, err)
	}
	return nil
}

// Clashes are what the node's policy rules and routes say of l being someone else's too: a
// rule not the agent's that matches a mark bit of l's or looks up one of l's tables, a
// route in one of l's tables that is not a default route the agent writes. Read at start:
// the agent refuses to take marks or tables another system uses.
func Clashes(l returnplan.Layout, rules []netlink.Rule, routes []netlink.Route) []string {
	var out []string
	for _, r := range rules {
		if ours(l, r) {
			continue
		}
		mask := uint32(0xffffffff)
		if r.Mask != nil {
			mask = *r.Mask
		}
		if r.Mark != 0 && mask&l.MarkMask() != 0 {
			out = append(out, fmt.Sprintf("rule %d matches mark %#x/%#x, which overlaps the return path marks %#x", r.Priority, r.Mark, mask, l.MarkMask()))
		} else if l.OwnTable(r.Table) || r.Table == l.TableBase {
			out = append(out, fmt.Sprintf("rule %d looks up table %d, one of the return path tables %d-%d", r.Priority, r.Table, l.TableBase, l.TableBase+returnplan.MaxPaths))
		}
	}
	for _, r := range routes {
		isDefault := r.Dst == nil || (r.Dst.IP.IsUnspecified() && func() bool { o, _ := r.Dst.Mask.Size(); return o == 0 }())
		if ours := isDefault && r.Protocol == unix.RTPROT_STATIC; l.OwnTable(r.Table) && !ours {
			out = append(out, fmt.Sprintf("table %d, one of the return path tables, holds a route the agent does not write (%s)", r.Table, r.Dst))
		}
	}
	return out
}

// CheckClashes reads the node's rules and routes and says which clash with l (Clashes).
func CheckClashes(l returnplan.Layout) error {
	var rules []netlink.Rule
	var routes []netlink.Route
	for _, f := range families {
		rs, err := netlink.RuleList(f.nlFam)
		if err != nil {
			return fmt.Errorf("list %s rules: %w", f.fam, err)
		}
		rules = append(rules, rs...)
		rt, err := netlink.RouteListFiltered(f.nlFam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
		if err != nil {
			return fmt.Errorf("list %s routes: %w", f.fam, err)
		}
		routes = append(routes, rt...)
	}
	if c := Clashes(l, rules, routes); len(c) > 0 {
		return fmt.Errorf("the return path marks %#x or tables %d-%d are in use on this node (move them with --return-mark-shift, --return-table-base, or --return-paths=false): %s",
			l.MarkMask(), l.TableBase, l.TableBase+returnplan.MaxPaths, strings.Join(c, "; "))
	}
	return nil
}
