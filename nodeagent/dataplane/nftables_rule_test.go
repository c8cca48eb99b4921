package dataplane

import (
	"fmt"
	"reflect"
	"testing"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// The rules the kernel holds must not change with how they are spelled: each step of nftRule,
// and each rule, against the expression list written out by hand, for both families.

func TestNFTRuleSteps(t *testing.T) {
	const mark = 0x200000
	set := &nftables.Set{Name: "s_a", ID: 7}
	for _, fam := range []Family{IPv4, IPv6} {
		l := newNFTLayout(fam, nftTableName, mark)
		n := l.addrLen
		daddr, saddr, nfproto, unreach := uint32(16), uint32(12), uint32(unix.NFPROTO_IPV4), uint8(3)
		if fam == IPv6 {
			daddr, saddr, nfproto, unreach = 24, 8, unix.NFPROTO_IPV6, 4
		}
		payloadDaddr := &expr.Payload{DestRegister: unix.NFT_REG32_00, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: n}
		for _, tc := range []struct {
			nft  string
			got  *nftRule
			want []expr.Any
		}{
			{"ip daddr", l.rule().ipDaddr(), []expr.Any{payloadDaddr}},
			{"ip daddr . meta l4proto . th dport", l.rule().portKey(), []expr.Any{
				payloadDaddr,
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: unix.NFT_REG32_00 + n/4},
				&expr.Payload{DestRegister: unix.NFT_REG32_00 + n/4 + 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
			}},
			{"ct original ip daddr . meta l4proto . ct original proto-dst", l.rule().ctOriginalPortKey(), []expr.Any{
				&expr.Ct{Key: expr.CtKeyDST, Direction: 0, Register: unix.NFT_REG32_00},
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: unix.NFT_REG32_00 + n/4},
				&expr.Ct{Key: expr.CtKeyPROTODST, Direction: 0, Register: unix.NFT_REG32_00 + n/4 + 1},
			}},
			{". ip saddr", l.rule().dotIPSaddr(), []expr.Any{
				&expr.Payload{DestRegister: unix.NFT_REG32_00 + n/4 + 2, Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: n},
			}},
			{". numgen random mod 3", l.rule().dotNumgenRandomMod(3), []expr.Any{
				&expr.Numgen{Register: unix.NFT_REG32_00 + n/4 + 2, Modulus: 3, Type: unix.NFT_NG_RANDOM},
			}},
			{"@s_a", l.rule().in(set), []expr.Any{&expr.Lookup{SourceRegister: unix.NFT_REG32_00, SetName: "s_a", SetID: 7}}},
			{"!= @s_a", l.rule().notIn(set), []expr.Any{&expr.Lookup{SourceRegister: unix.NFT_REG32_00, SetName: "s_a", SetID: 7, Invert: true}}},
			{"ct state untracked", l.rule().ctStateUntracked(), []expr.Any{
				&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(expr.CtStateBitUNTRACKED), Xor: native32(0)},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)},
			}},
			{"meta l4proto tcp", l.rule().l4protoTCP(), []expr.Any{
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
			}},
			{"meta mark & MARK != 0", l.rule().markHasOurs(), []expr.Any{
				&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(mark), Xor: native32(0)},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)},
			}},
			{"meta mark set meta mark | MARK", l.rule().orMark(), []expr.Any{
				&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(^uint32(mark)), Xor: native32(mark)},
				&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
			}},
			{"meta mark set meta mark & ~MARK", l.rule().andNotMark(), []expr.Any{
				&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(^uint32(mark)), Xor: native32(0)},
				&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
			}},
			{"counter", l.rule().counter(), []expr.Any{&expr.Counter{}}},
			{"masquerade fully-random", l.rule().masqueradeFullyRandom(), []expr.Any{&expr.Masq{FullyRandom: true}}},
			{"dnat to <key> map @s_a", l.rule().dnatToMap(set), []expr.Any{
				&expr.Lookup{SourceRegister: unix.NFT_REG32_00, DestRegister: unix.NFT_REG32_00, IsDestRegSet: true, SetName: "s_a", SetID: 7},
				&expr.NAT{Type: expr.NATTypeDestNAT, Family: nfproto, RegAddrMin: unix.NFT_REG32_00, RegProtoMin: unix.NFT_REG32_00 + n/4, Specified: true},
			}},
			{"update @s_a { <key> timeout 30s : ip daddr . th dport }", l.rule().updateToDaddrDport(set, 30), []expr.Any{
				&expr.Payload{DestRegister: unix.NFT_REG32_00 + (2*n+8)/4, Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: n},
				&expr.Payload{DestRegister: unix.NFT_REG32_00 + (3*n+8)/4, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
				&expr.Dynset{SrcRegKey: unix.NFT_REG32_00, SrcRegData: unix.NFT_REG32_00 + (2*n+8)/4, SetName: "s_a", SetID: 7,
					Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: 30 * time.Second},
			}},
			{"reject with tcp reset", l.rule().rejectTCPReset(), []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}}},
			{"reject with icmp port-unreachable", l.rule().rejectPortUnreachable(), []expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: unreach}}},
			{"jump services", l.rule().jumpTo(nftServices), []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: nftServices}}},
			{"return", l.rule().thenReturn(), []expr.Any{&expr.Verdict{Kind: expr.VerdictReturn}}},
		} {
			if !reflect.DeepEqual(tc.got.exprs, tc.want) {
				t.Errorf("%s %s:\n got %s\nwant %s", fam, tc.nft, spell(tc.got.exprs), spell(tc.want))
			}
		}
	}
}

// TestNFTRules: every rule the plane writes, spelled with nftRule, is the expression list
// spelled out by hand (literal*).
func TestNFTRules(t *testing.T) {
	sets := map[setID]*nftables.Set{}
	for i, id := range append(fixedSets, setClients, endpointsSet(3), affinitySet(30)) {
		sets[id] = &nftables.Set{Name: id.String() + "_b", ID: uint32(i + 1)}
	}
	for _, fam := range []Family{IPv4, IPv6} {
		l := newNFTLayout(fam, nftTableName, 0x4000)
		got, want := l.fixedRules(sets), literalFixedRules(l, sets)
		if !reflect.DeepEqual(got, want) {
			for chain := range want {
				if !reflect.DeepEqual(got[chain], want[chain]) {
					t.Errorf("%s chain %s:\n got %s\nwant %s", fam, chain, spellRules(got[chain]), spellRules(want[chain]))
				}
			}
			t.Errorf("%s: fixed rules of %d chains, want %d", fam, len(got), len(want))
		}
		for _, c := range []struct {
			name      string
			got, want []expr.Any
		}{
			{"dnat", l.dnatRule(sets[endpointsSet(3)], 3), literalDNATRule(l, sets[endpointsSet(3)], 3)},
			{"affinity lookup", l.affinityLookupRule(sets[affinitySet(30)], sets[setClients]), literalAffinityLookupRule(l, sets[affinitySet(30)], sets[setClients])},
			{"affinity record", l.affinityRecordRule(sets[affinitySet(30)], sets[setClients], 30), literalAffinityRecordRule(l, sets[affinitySet(30)], sets[setClients], 30)},
		} {
			if !reflect.DeepEqual(c.got, c.want) {
				t.Errorf("%s %s rule:\n got %s\nwant %s", fam, c.name, spell(c.got), spell(c.want))
			}
		}
	}
}

// spell prints the expressions themselves, not their addresses.
func spell(exprs []expr.Any) string {
	var out []any
	for _, e := range exprs {
		out = append(out, reflect.Indirect(reflect.ValueOf(e)).Interface())
	}
	return fmt.Sprintf("%+v", out)
}

func spellRules(rules [][]expr.Any) string {
	var out []string
	for _, r := range rules {
		out = append(out, spell(r))
	}
	return fmt.Sprint(out)
}

// The rules as expression lists spelled out by hand: the reference nftRule must match, so a
// change to a step that changes what the kernel holds fails here first.

func literalPortKey(l *nftLayout) []expr.Any {
	daddr := uint32(16)
	if l.v6 {
		daddr = 24
	}
	return []expr.Any{
		&expr.Payload{DestRegister: reg(0), Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: l.addrLen},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg(l.addrLen)},
		&expr.Payload{DestRegister: reg(l.addrLen + 4), Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	}
}

func literalSourceAfterPortKey(l *nftLayout) expr.Any {
	saddr := uint32(12)
	if l.v6 {
		saddr = 8
	}
	return &expr.Payload{DestRegister: reg(l.addrLen + 8), Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: l.addrLen}
}

func literalLookup(s *nftables.Set, invert bool) *expr.Lookup {
	return &expr.Lookup{SourceRegister: reg(0), SetName: s.Name, SetID: s.ID, Invert: invert}
}

func literalSetMark(l *nftLayout) []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(^l.mark), Xor: native32(l.mark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	}
}

func literalCat(parts ...[]expr.Any) []expr.Any {
	var out []expr.Any
	for _, p := range parts {
		out = append(out, p...)
	}
	return out
}

func literalFixedRules(l *nftLayout, sets map[setID]*nftables.Set) map[string][][]expr.Any {
	verdictReturn := &expr.Verdict{Kind: expr.VerdictReturn}
	jump := func(chain string) [][]expr.Any {
		return [][]expr.Any{{&expr.Verdict{Kind: expr.VerdictJump, Chain: chain}}}
	}
	loadDaddr := literalPortKey(l)[0]
	icmpPortUnreachable := uint8(3)
	if l.v6 {
		icmpPortUnreachable = 4
	}
	return map[string][][]expr.Any{
		nftServices: {
			{loadDaddr, literalLookup(sets[setVIPs], true), verdictReturn},
			literalCat(literalPortKey(l), []expr.Any{literalLookup(sets[setRestricted], false), literalSourceAfterPortKey(l), literalLookup(sets[setAllowed], true), verdictReturn}),
			literalCat(literalPortKey(l), []expr.Any{literalLookup(sets[setMasquerade], false)}, literalSetMark(l)),
			literalCat(literalPortKey(l), []expr.Any{literalSourceAfterPortKey(l), literalLookup(sets[setHairpin], false)}, literalSetMark(l)),
			{&expr.Verdict{Kind: expr.VerdictJump, Chain: nftAffinityLookup}},
		},
		nftRejectVIPs: {
			{
				&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
				&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(expr.CtStateBitUNTRACKED), Xor: native32(0)},
				&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)},
				verdictReturn,
			},
			{
				loadDaddr, literalLookup(sets[setVIPs], false),
				&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
				&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
				&expr.Reject{Type: unix.NFT_REJECT_TCP_RST},
			},
			{loadDaddr, literalLookup(sets[setVIPs], false), &expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: icmpPortUnreachable}},
		},
		nftSteer: {
			{loadDaddr, literalLookup(sets[setVIPs], true), verdictReturn},
			literalCat(literalPortKey(l), []expr.Any{literalLookup(sets[setSteerClient], false)}, literalSteer(l, sets[setSteer], false)),
			literalCat(literalPortKey(l), []expr.Any{literalLookup(sets[setSteerClient], false), verdictReturn}),
			literalCat(literalPortKey(l), literalSteer(l, sets[setSteer], true)),
		},
		nftNATPrerouting: jump(nftServices),
		nftNATOutput:     jump(nftServices),
		nftNATPostrouting: {jump(nftAffinityRecord)[0], {
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(l.mark), Xor: native32(0)},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)},
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(^l.mark), Xor: native32(0)},
			&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
			&expr.Counter{},
			&expr.Masq{FullyRandom: true},
		}},
		nftNATInput:      jump(nftAffinityRecord),
		nftFilterInput:   jump(nftRejectVIPs),
		nftFilterForward: jump(nftRejectVIPs),
		nftFilterOutput:  jump(nftRejectVIPs),
	}
}

func literalDNAT(l *nftLayout) expr.Any {
	nfproto := uint32(unix.NFPROTO_IPV4)
	if l.v6 {
		nfproto = unix.NFPROTO_IPV6
	}
	return &expr.NAT{Type: expr.NATTypeDestNAT, Family: nfproto, RegAddrMin: reg(0), RegProtoMin: reg(l.addrLen), Specified: true}
}

func literalDNATRule(l *nftLayout, m *nftables.Set, k int) []expr.Any {
	return literalCat(literalPortKey(l), []expr.Any{
		&expr.Numgen{Register: reg(l.addrLen + 8), Modulus: uint32(k), Type: unix.NFT_NG_RANDOM},
		&expr.Lookup{SourceRegister: reg(0), DestRegister: reg(0), IsDestRegSet: true, SetName: m.Name, SetID: m.ID},
		literalDNAT(l),
	})
}

func literalAffinityLookupRule(l *nftLayout, gate, clients *nftables.Set) []expr.Any {
	return literalCat(literalPortKey(l), []expr.Any{
		literalLookup(gate, false),
		literalSourceAfterPortKey(l),
		&expr.Lookup{SourceRegister: reg(0), DestRegister: reg(0), IsDestRegSet: true, SetName: clients.Name, SetID: clients.ID},
		literalDNAT(l),
	})
}

func literalAffinityRecordRule(l *nftLayout, gate, clients *nftables.Set, secs uint32) []expr.Any {
	keyLen := l.addrLen*2 + 8
	daddr, saddr := uint32(16), uint32(12)
	if l.v6 {
		daddr, saddr = 24, 8
	}
	return []expr.Any{
		&expr.Ct{Key: expr.CtKeyDST, Direction: 0, Register: reg(0)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg(l.addrLen)},
		&expr.Ct{Key: expr.CtKeyPROTODST, Direction: 0, Register: reg(l.addrLen + 4)},
		literalLookup(gate, false),
		&expr.Payload{DestRegister: reg(l.addrLen + 8), Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: l.addrLen},
		&expr.Payload{DestRegister: reg(keyLen), Base: expr.PayloadBaseNetworkHeader, Offset: daddr, Len: l.addrLen},
		&expr.Payload{DestRegister: reg(keyLen + l.addrLen), Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Dynset{SrcRegKey: reg(0), SrcRegData: reg(keyLen), SetName: clients.Name, SetID: clients.ID,
			Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: time.Duration(secs) * time.Second},
	}
}

// BenchmarkNFTRules spells every rule of a table with 3 endpoint maps, through nftRule and as
// literal lists: a full Sync spells them once.
func BenchmarkNFTRules(b *testing.B) {
	sets := map[setID]*nftables.Set{}
	for i, id := range append(fixedSets, setClients, endpointsSet(1), endpointsSet(2), endpointsSet(3)) {
		sets[id] = &nftables.Set{Name: id.String() + "_b", ID: uint32(i + 1)}
	}
	l := newNFTLayout(IPv4, nftTableName, 0x4000)
	b.Run("nftRule", func(b *testing.B) {
		for b.Loop() {
			l.fixedRules(sets)
			for k := 1; k <= 3; k++ {
				l.dnatRule(sets[endpointsSet(k)], k)
			}
		}
	})
	b.Run("literal", func(b *testing.B) {
		for b.Loop() {
			literalFixedRules(l, sets)
			for k := 1; k <= 3; k++ {
				literalDNATRule(l, sets[endpointsSet(k)], k)
			}
		}
	})
}

// literalSteer is `. jhash ip saddr [. th sport] mod 256 seed 0x76697061 map @steer` into the
// mark, then `notrack`: the source fields sit behind the bucket's register (port key, then the
// bucket), the hash writes the bucket, the map's data is the mark.
func literalSteer(l *nftLayout, steer *nftables.Set, withPort bool) []expr.Any {
	saddr, hashLen := uint32(12), uint32(4)
	if l.v6 {
		saddr, hashLen = 8, 16
	}
	out := []expr.Any{&expr.Payload{DestRegister: reg(l.addrLen + 12), Base: expr.PayloadBaseNetworkHeader, Offset: saddr, Len: l.addrLen}}
	if withPort {
		out = append(out, &expr.Payload{DestRegister: reg(2*l.addrLen + 12), Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2})
		hashLen += 4
	}
	return append(out,
		&expr.Hash{SourceRegister: reg(l.addrLen + 12), DestRegister: reg(l.addrLen + 8), Length: hashLen, Modulus: 256, Seed: 0x76697061, Type: expr.HashTypeJenkins},
		&expr.Lookup{SourceRegister: reg(0), DestRegister: reg(0), IsDestRegSet: true, SetName: steer.Name, SetID: steer.ID},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg(0)},
		&expr.Notrack{},
	)
}
