package dataplane

import (
	"github.com/google/nftables"
	"github.com/google/nftables/expr"
)

// This file declares the nftables plane's table: its chains, sets and the few fixed rules. In
// nft's words (IPv4; IPv6 is the same with ip6):
//
//	table ip vip-allocator {
//	  chain services {                      # from nat-prerouting and nat-output
//	    ip daddr != @vips_a return          # sets and maps are named _a or _b: see writeFull
//	    ip daddr . meta l4proto . th dport @restricted ip daddr . meta l4proto . th dport . ip saddr != @allowed return
//	    ip daddr . meta l4proto . th dport @masquerade meta mark set meta mark | MARK
//	    ip daddr . meta l4proto . th dport . ip saddr @hairpin meta mark set meta mark | MARK
//	    jump affinity-lookup
//	    dnat ip to ip daddr . meta l4proto . th dport . numgen random mod K map @endpoints_K   # one per K in use
//	  }
//	  chain affinity-lookup {               # one rule per session affinity T (seconds) in use
//	    ip daddr . meta l4proto . th dport @affinity_T dnat ip to ip daddr . meta l4proto . th dport . ip saddr map @affinity
//	  }
//	  chain affinity-record {               # from nat-postrouting, before the masquerade, and nat-input
//	    ct original ip daddr . meta l4proto . ct original proto-dst @affinity_T
//	      update @affinity { ct original ip daddr . meta l4proto . ct original proto-dst . ip saddr timeout T : ip daddr . th dport }
//	  }
//	  chain reject-vips {                   # from filter-input, filter-forward, filter-output
//	    ct state untracked return           # connection handoff copies (handoff.go)
//	    ip daddr @vips meta l4proto tcp reject with tcp reset
//	    ip daddr @vips reject with icmp port-unreachable
//	  }
//	  chain nat-postrouting { jump affinity-record; meta mark & MARK != 0 meta mark set meta mark & ~MARK counter masquerade fully-random }
//	  chain nat-input { jump affinity-record }
//	  chain steer { ... }                   # prerouting, priority raw: steering (steering.go)
//	  map affinity { ...; flags dynamic,timeout }  # filled by the kernel: who used which endpoint
//	}
//
// Session affinity: a new connection to a port with affinity whose client the map affinity
// holds goes to that endpoint; any other falls through to the random pick. After NAT, every new
// connection to such a port records (or renews) its client and endpoint, for T seconds. nat
// chains see only a connection's first packet, so only new connections count. An element
// names an endpoint until it expires: when an endpoint goes, or a port loses its affinity,
// the plane deletes that port's elements (see forgetClients).
//
// What is still addressed to a VIP after DNAT (a port the Service does not expose, no ready
// endpoint, a source outside loadBalancerSourceRanges) is rejected at once, as on the
// iptables plane.

// nftTableName is the plane's table, in family ip and ip6: everything in it is ours, and the
// plane writes nothing outside it.
const nftTableName = "vip-allocator"

// Chain names.
const (
	nftServices       = "services"
	nftRejectVIPs     = "reject-vips"
	nftNATPrerouting  = "nat-prerouting"
	nftNATOutput      = "nat-output"
	nftNATPostrouting = "nat-postrouting"
	nftNATInput       = "nat-input"
	nftFilterInput    = "filter-input"
	nftFilterForward  = "filter-forward"
	nftFilterOutput   = "filter-output"
	nftAffinityLookup = "affinity-lookup"
	nftAffinityRecord = "affinity-record"
	nftSteer          = "steer"
)

// nftClientsMap is the map of clients of ports with session affinity (setClients).
const nftClientsMap = "affinity"

// nftClientsMapSize bounds the clients the map holds; when it is full, new clients get no
// affinity until elements expire.
const nftClientsMapSize = 1 << 20

// Priorities one below those of iptables' tables (and of kube-proxy's nftables mode) at each
// hook, so our DNAT binds a VIP's connection before anyone else's nat rule sees it: the first
// nat chain that translates a connection wins, later ones are skipped.
var (
	nftDNATPriority   = nftables.ChainPriority(-101) // dstnat - 1
	nftSNATPriority   = nftables.ChainPriority(99)   // srcnat - 1
	nftFilterPriority = nftables.ChainPriority(-1)   // filter - 1
	// Steering runs before conntrack (-200), which must not see a steered packet.
	nftSteerPriority = *nftables.ChainPriorityRaw
)

// nftLayout builds the table's objects for one family.
type nftLayout struct {
	table   *nftables.Table
	addrLen uint32 // 4 or 16
	mark    uint32
	v6      bool
	gen     string // suffix of the set names, see writeFull
}

// withGen is l naming its sets with generation gen.
func (l *nftLayout) withGen(gen string) *nftLayout {
	c := *l
	c.gen = gen
	return &c
}

func newNFTLayout(fam Family, table string, mark uint32) *nftLayout {
	l := &nftLayout{table: &nftables.Table{Name: table, Family: nftables.TableFamilyIPv4}, addrLen: 4, mark: mark}
	if fam == IPv6 {
		l.table.Family, l.addrLen, l.v6 = nftables.TableFamilyIPv6, 16, true
	}
	return l
}

// chains lists every chain, regular chains (jump targets) first, each before its callers.
func (l *nftLayout) chains() []*nftables.Chain {
	base := func(name string, typ nftables.ChainType, hook *nftables.ChainHook, prio nftables.ChainPriority) *nftables.Chain {
		return &nftables.Chain{Name: name, Table: l.table, Type: typ, Hooknum: hook, Priority: nftables.ChainPriorityRef(prio)}
	}
	return []*nftables.Chain{
		{Name: nftAffinityLookup, Table: l.table}, // jumped to from services
		{Name: nftAffinityRecord, Table: l.table},
		{Name: nftServices, Table: l.table},
		{Name: nftRejectVIPs, Table: l.table},
		base(nftNATPrerouting, nftables.ChainTypeNAT, nftables.ChainHookPrerouting, nftDNATPriority),
		base(nftNATOutput, nftables.ChainTypeNAT, nftables.ChainHookOutput, nftDNATPriority),
		base(nftNATPostrouting, nftables.ChainTypeNAT, nftables.ChainHookPostrouting, nftSNATPriority),
		base(nftNATInput, nftables.ChainTypeNAT, nftables.ChainHookInput, nftSNATPriority),
		base(nftFilterInput, nftables.ChainTypeFilter, nftables.ChainHookInput, nftFilterPriority),
		base(nftFilterForward, nftables.ChainTypeFilter, nftables.ChainHookForward, nftFilterPriority),
		base(nftFilterOutput, nftables.ChainTypeFilter, nftables.ChainHookOutput, nftFilterPriority),
		base(nftSteer, nftables.ChainTypeFilter, nftables.ChainHookPrerouting, nftSteerPriority),
	}
}

// set declares one set or map.
func (l *nftLayout) set(id setID) *nftables.Set {
	addr := nftables.TypeIPAddr
	if l.v6 {
		addr = nftables.TypeIP6Addr
	}
	port := []nftables.SetDatatype{addr, nftables.TypeInetProto, nftables.TypeInetService}
	s := &nftables.Set{Table: l.table, Name: id.String() + "_" + l.gen}
	switch {
	case id == setVIPs:
		s.KeyType = addr
	case id == setRestricted || id == setMasquerade || id == setSteerClient:
		s.KeyType = nftables.MustConcatSetType(port...)
	case id == setSteer:
		s.KeyType = nftables.MustConcatSetType(append(port, nftables.TypeMark)...)
		s.IsMap = true
		s.DataType = nftables.TypeMark
	case id == setAllowed:
		s.KeyType = nftables.MustConcatSetType(append(port, addr)...)
		s.Interval = true
	case id == setHairpin:
		s.KeyType = nftables.MustConcatSetType(append(port, addr)...)
	case id == setClients:
		s.Name = nftClientsMap // one generation only, see setClients
		s.KeyType = nftables.MustConcatSetType(append(port, addr)...)
		s.IsMap, s.Dynamic, s.HasTimeout, s.Size = true, true, true, nftClientsMapSize
		s.DataType = nftables.MustConcatSetType(addr, nftables.TypeInetService)
	case id.affinitySeconds() > 0:
		s.KeyType = nftables.MustConcatSetType(port...)
	default: // an endpoint map
		// The index is typed "mark": a 32-bit host-order number like numgen's output, and
		// one nft can print (nft 1.0.6 aborts listing a concatenation with "integer").
		s.KeyType = nftables.MustConcatSetType(append(port, nftables.TypeMark)...)
		s.IsMap = true
		s.DataType = nftables.MustConcatSetType(addr, nftables.TypeInetService)
	}
	s.Concatenation = id != setVIPs
	return s
}

// fixedSets are the sets every table has; endpoint maps come and go with endpoint counts.
var fixedSets = []setID{setVIPs, setRestricted, setAllowed, setMasquerade, setHairpin, setSteer, setSteerClient}

// fixedRules are the rules of every table, by chain, given its fixed sets.
func (l *nftLayout) fixedRules(sets map[setID]*nftables.Set) map[string][][]expr.Any {
	jumpTo := func(chain string) [][]expr.Any { return [][]expr.Any{l.rule().jumpTo(chain).exprs} }
	return map[string][][]expr.Any{
		nftServices: {
			l.rule().ipDaddr().notIn(sets[setVIPs]).thenReturn().exprs,
			l.rule().portKey().in(sets[setRestricted]).dotIPSaddr().notIn(sets[setAllowed]).thenReturn().exprs,
			l.rule().portKey().in(sets[setMasquerade]).orMark().exprs,
			l.rule().portKey().dotIPSaddr().in(sets[setHairpin]).orMark().exprs,
			l.rule().jumpTo(nftAffinityLookup).exprs,
		},
		nftRejectVIPs: {
			l.rule().ctStateUntracked().thenReturn().exprs,
			l.rule().ipDaddr().in(sets[setVIPs]).l4protoTCP().rejectTCPReset().exprs,
			l.rule().ipDaddr().in(sets[setVIPs]).rejectPortUnreachable().exprs,
		},
		nftSteer: {
			l.rule().ipDaddr().notIn(sets[setVIPs]).thenReturn().exprs,
			l.rule().portKey().in(sets[setSteerClient]).dotJhashMod(false, steerBuckets, steerSeed).markSetFromMap(sets[setSteer]).notrack().exprs,
			l.rule().portKey().in(sets[setSteerClient]).thenReturn().exprs,
			l.rule().portKey().dotJhashMod(true, steerBuckets, steerSeed).markSetFromMap(sets[setSteer]).notrack().exprs,
		},
		nftNATPrerouting: jumpTo(nftServices),
		nftNATOutput:     jumpTo(nftServices),
		nftNATPostrouting: {
			l.rule().jumpTo(nftAffinityRecord).exprs,
			// Clear the bit so a packet that loops back through the stack is not masqueraded
			// twice; count what is masqueraded, for people and tests; random source ports
			// avoid the SNAT port race that drops SYNs under load.
			l.rule().markHasOurs().andNotMark().counter().masqueradeFullyRandom().exprs,
		},
		// A connection DNATed to an endpoint of this host's own never reaches postrouting.
		nftNATInput:      jumpTo(nftAffinityRecord),
		nftFilterInput:   jumpTo(nftRejectVIPs),
		nftFilterForward: jumpTo(nftRejectVIPs),
		nftFilterOutput:  jumpTo(nftRejectVIPs),
	}
}

// dnatRule spreads the Service ports with k endpoints over them: a random index picks the
// element of the endpoint map, whose data is the endpoint address and port.
func (l *nftLayout) dnatRule(m *nftables.Set, k int) []expr.Any {
	return l.rule().portKey().dotNumgenRandomMod(k).dnatToMap(m).exprs
}

// affinityLookupRule sends a new connection to a port of gate (a set of ports with one
// session affinity) to the endpoint the clients map holds for its client; a client the map
// lacks does not match and falls through to the random pick.
func (l *nftLayout) affinityLookupRule(gate, clients *nftables.Set) []expr.Any {
	return l.rule().portKey().in(gate).dotIPSaddr().dnatToMap(clients).exprs
}

// affinityRecordRule records, after NAT, the client and endpoint of a new connection to a port
// of gate, for secs seconds: the key is the Service port as the client addressed it (the
// connection's original destination), the data the endpoint DNAT chose.
func (l *nftLayout) affinityRecordRule(gate, clients *nftables.Set, secs uint32) []expr.Any {
	return l.rule().ctOriginalPortKey().in(gate).dotIPSaddr().updateToDaddrDport(clients, secs).exprs
}

// ruleCounts is how many rules each chain holds with maps endpoint maps and affinities
// session affinities in use: Healthy compares.
func (l *nftLayout) ruleCounts(maps, affinities int) map[string]int {
	counts := map[string]int{}
	for chain, rules := range l.fixedRules(map[setID]*nftables.Set{setVIPs: {}, setRestricted: {}, setAllowed: {}, setMasquerade: {}, setHairpin: {}, setSteer: {}, setSteerClient: {}}) {
		counts[chain] = len(rules)
	}
	counts[nftServices] += maps
	counts[nftAffinityLookup] += affinities
	counts[nftAffinityRecord] += affinities
	return counts
}
