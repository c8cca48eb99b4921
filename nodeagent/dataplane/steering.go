package dataplane

import (
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"

	"github.com/vishvananda/netlink"
	"golang.org/x/sys/unix"

	"github.com/paas-org/vip-allocator-operator/internal/steering"
)

// Steering splits a steered Service's data path in two stages (nftables plane).
//
// Steering, on whichever node a packet enters by, stateless: before conntrack (chain steer,
// prerouting at priority raw) a hash of the flow picks one of steerBuckets buckets, and the
// Service port's steering table (internal/steering, the same on every node: it is built from
// the same EndpointSlices) names the node that serves the bucket. A packet for another node is
// marked with that node's steering mark and left untracked (notrack): policy routing (one rule
// per mark, one table per serving node holding a default route via that node's address) sends
// it, unchanged, to that node. A packet whose bucket is this node's, and any packet of a port
// not steered, falls through to the nat chains. In nft's words:
//
//	chain steer {                         # type filter hook prerouting priority raw
//	  ip daddr != @vips_a return
//	  ip daddr . meta l4proto . th dport @steer_client_a meta mark set ip daddr . meta l4proto . th dport . jhash ip saddr mod 256 seed 0x76697061 map @steer_a notrack
//	  ip daddr . meta l4proto . th dport @steer_client_a return
//	  meta mark set ip daddr . meta l4proto . th dport . jhash ip saddr . th sport mod 256 seed 0x76697061 map @steer_a notrack
//	}
//
// The flow's hash is of its source address and port (the destination is the Service port
// itself); of the source address alone under sessionAffinity ClientIP, so a client's flows all
// reach one serving node, whose own affinity then keeps it on one endpoint.
//
// Serving, on the node a flow is steered to: the nat chains DNAT it to this node's own ready
// endpoints only, never masquerading it (the source is the client's, policy Local or
// Cluster alike), and the endpoint's reply leaves this node straight to the client, its source
// the VIP again (direct server return). Conntrack of the serving node is the flow's only state:
// when an entry node dies, the node that takes its VIPs steers each flow where it went before.
//
// The entry node must not tell the client to go to the serving node itself (an ICMP redirect,
// since the packet leaves by the interface it came in on): SetSteering turns send_redirects off.

// steerBuckets is the size of every steering table: the modulus of the rules' hash.
const steerBuckets = steering.DefaultBuckets

// steerSeed seeds the flow hash; every node must use the same (a jhash with no seed would get
// a random one per rule).
const steerSeed = 0x76697061

// The steering marks: serving node n (1..maxSteerNodes, in name order) is mark n within
// SteerMarkMask, routed by table SteerTableBase+n. The low byte is free of kube-proxy's bits
// (14, 15), the masquerade bit (21 by default) and the return marks (returnplan.MarkMask).
const (
	SteerMarkMask  uint32 = 0xff
	SteerTableBase int    = 5600
	// SteerRulePriority orders the steering rules before the return marks' and the main table.
	SteerRulePriority = 30900
	maxSteerNodes     = 255
)

// Steering tells a plane who serves steered flows: this node's name and, for every other node
// that may serve, its address on the network the nodes share (the next hop a steered packet is
// sent to).
type Steering struct {
	Node  string
	Peers map[string]netip.Addr
}

// Steerer is a plane that steers (the nftables plane). SetSteering installs the policy routes
// to the peers of its family and makes the next Sync steer the Services that ask for it;
// without a call, or with no Node, no Service is steered.
type Steerer interface {
	SetSteering(s Steering) error
}

// steerView is what rendering needs of Steering: this node's name and each peer's mark.
type steerView struct {
	self  string
	marks map[string]uint32
	// tables builds the steering tables, each distinct spread of endpoints once.
	tables *steering.Cache
}

// newSteerView numbers the peers of family fam in name order (this node takes no mark: its
// buckets fall through). Peers past maxSteerNodes get none: their flows are not steered.
func newSteerView(fam Family, s Steering) *steerView {
	if s.Node == "" {
		return nil
	}
	v := &steerView{self: s.Node, marks: map[string]uint32{}, tables: &steering.Cache{}}
	for _, name := range slices.Sorted(maps.Keys(s.Peers)) {
		if name == s.Node || !fam.matches(s.Peers[name].Unmap()) || len(v.marks) == maxSteerNodes {
			continue
		}
		v.marks[name] = uint32(len(v.marks) + 1)
	}
	return v
}

// equal reports whether v and o render the same elements.
func (v *steerView) equal(o *steerView) bool {
	if v == nil || o == nil {
		return v == o
	}
	return v.self == o.self && maps.Equal(v.marks, o.marks)
}

// appendElements appends the steering elements of one Service port key: the buckets of other
// nodes, each to its node's mark (a bucket of this node, or of a node without a mark, has
// none: it falls through), and, under session affinity, the key in setSteerClient.
func (v *steerView) appendElements(out []byte, key []byte, t steering.Table, clientOnly bool) []byte {
	if clientOnly {
		out = appendElem(out, setSteerClient, key, nil, nil, nil, nil)
	}
	var idx, val [4]byte
	for b := range t.Buckets {
		mark := v.marks[t.Owner(b)]
		if mark == 0 {
			continue
		}
		binary.NativeEndian.PutUint32(idx[:], uint32(b)) // jhash writes its number in host order
		binary.NativeEndian.PutUint32(val[:], mark)
		out = appendElem(out, setSteer, key, idx[:], nil, nil, val[:])
	}
	return out
}

// SetSteering installs the steering routes of s and, when who serves changed, makes the next
// Sync rewrite every element (see Steerer).
func (n *NFTables) SetSteering(s Steering) error {
	v := newSteerView(n.cfg.Family, s)
	// The routes of the peers that can be reached are installed whatever the others do; a
	// flow steered to a peer without its route leaves by the main table and is lost, as it
	// would be with the peer gone.
	err := applySteerRoutes(n.cfg.Family, v, s.Peers)
	if v != nil {
		err = errors.Join(err, noRedirects(n.cfg.Family))
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if !v.equal(n.steer) {
		n.steer = v
		n.last = nil // marks changed: every steered element with them
	}
	return err
}

// steerRoutes are the policy rules and routes of v: per peer, `ip rule fwmark N/0xff lookup
// SteerTableBase+N` and, in that table, the default route via the peer's address.
func steerRoutes(fam Family, v *steerView, peers map[string]netip.Addr) ([]netlink.Rule, []netlink.Route) {
	if v == nil {
		return nil, nil
	}
	nlFam, dst := netlink.FAMILY_V4, netip.PrefixFrom(netip.IPv4Unspecified(), 0)
	if fam == IPv6 {
		nlFam, dst = netlink.FAMILY_V6, netip.PrefixFrom(netip.IPv6Unspecified(), 0)
	}
	var rules []netlink.Rule
	var routes []netlink.Route
	for _, name := range slices.Sorted(maps.Keys(v.marks)) {
		mark, mask := v.marks[name], SteerMarkMask
		r := netlink.NewRule()
		r.Family, r.Priority, r.Mark, r.Mask, r.Table = nlFam, SteerRulePriority, mark, &mask, SteerTableBase+int(mark)
		rules = append(rules, *r)
		routes = append(routes, netlink.Route{Family: nlFam, Table: SteerTableBase + int(mark),
			Dst: &net.IPNet{IP: dst.Addr().AsSlice(), Mask: net.CIDRMask(0, dst.Addr().BitLen())},
			Gw:  peers[name].Unmap().AsSlice(), Protocol: unix.RTPROT_STATIC})
	}
	return rules, routes
}

// applySteerRoutes makes our rules (at SteerRulePriority with SteerMarkMask) and tables hold
// exactly v's, for family fam. A peer that cannot be routed to (its address on no network of
// this node) is reported, and the others are installed.
func applySteerRoutes(fam Family, v *steerView, peers map[string]netip.Addr) error {
	rules, routes := steerRoutes(fam, v, peers)
	nlFam := netlink.FAMILY_V4
	if fam == IPv6 {
		nlFam = netlink.FAMILY_V6
	}
	var errs []error
	have, err := netlink.RuleList(nlFam)
	if err != nil {
		return fmt.Errorf("list %s rules: %w", fam, err)
	}
	want := map[int]netlink.Rule{}
	for _, r := range rules {
		want[r.Table] = r
	}
	for _, r := range have {
		if r.Priority != SteerRulePriority || r.Mask == nil || *r.Mask != SteerMarkMask {
			continue
		}
		if w, ok := want[r.Table]; ok && w.Mark == r.Mark {
			delete(want, r.Table)
			continue
		}
		r.Family = nlFam
		if err := netlink.RuleDel(&r); err != nil {
			errs = append(errs, fmt.Errorf("delete steering rule %s: %w", r, err))
		}
	}
	for _, r := range want {
		if err := netlink.RuleAdd(&r); err != nil {
			errs = append(errs, fmt.Errorf("add steering rule %s: %w", r, err))
		}
	}
	// Each table holds one default route: replace it, and empty the tables no peer uses.
	used := map[int]bool{}
	for _, r := range routes {
		used[r.Table] = true
		if err := netlink.RouteReplace(&r); err != nil {
			errs = append(errs, fmt.Errorf("route %s table %d via %s: %w", fam, r.Table, r.Gw, err))
		}
	}
	all, err := netlink.RouteListFiltered(nlFam, &netlink.Route{Table: unix.RT_TABLE_UNSPEC}, netlink.RT_FILTER_TABLE)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("list %s routes: %w", fam, err))...)
	}
	for _, r := range all {
		if r.Table > SteerTableBase && r.Table <= SteerTableBase+maxSteerNodes && !used[r.Table] {
			if err := netlink.RouteDel(&r); err != nil {
				errs = append(errs, fmt.Errorf("delete steering route %s: %w", r, err))
			}
		}
	}
	return errors.Join(errs...)
}

// noRedirects turns ICMP redirects off on every interface (and for those to come): an entry
// node sends a steered packet out by the interface it came in on, which would otherwise tell
// the client to send to the serving node itself, bypassing the next failover. The kernel
// sends redirects when "all" or the interface's own setting says so, hence both. IPv6 has no
// such setting.
func noRedirects(fam Family) error {
	if fam != IPv4 {
		return nil
	}
	paths, err := filepath.Glob("/proc/sys/net/ipv4/conf/*/send_redirects")
	if err != nil {
		return err
	}
	var errs []error
	for _, p := range paths {
		if b, err := os.ReadFile(p); err == nil && string(b) == "0\n" { //nolint:gosec // p is a sysctl path matched under /proc/sys, no input names it
			continue
		}
		if err := os.WriteFile(p, []byte("0"), 0o644); err != nil { //nolint:gosec // a sysctl exists already: the mode is never used
			errs = append(errs, fmt.Errorf("turn ICMP redirects off: %w", err))
		}
	}
	return errors.Join(errs...)
}

// CleanupSteering removes the steering rules and routes of family fam.
func CleanupSteering(fam Family) error {
	return applySteerRoutes(fam, nil, nil)
}
