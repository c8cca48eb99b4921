package dataplane

import (
	"encoding/binary"
	"time"

	"github.com/google/nftables"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// This file spells the nftables plane's rules: netlink takes a rule as a list of expressions
// (load into a register, compare, look up, act), so each step of nftRule appends the
// expressions of one phrase of nft's syntax, and a rule reads as nft prints it:
//
//	l.rule().portKey().in(masquerade).orMark()
//	ip daddr . meta l4proto . th dport @masquerade meta mark set meta mark | MARK
//
// Keys are concatenations built from register 0 on: a lookup or a map reads the key there, and
// a map writes its data back there for dnat.

// nftRule is one rule being spelled for the family of its layout.
type nftRule struct {
	l     *nftLayout
	exprs []expr.Any
}

// rule starts an empty rule.
func (l *nftLayout) rule() *nftRule { return &nftRule{l: l, exprs: make([]expr.Any, 0, 8)} }

func (r *nftRule) add(e ...expr.Any) *nftRule {
	r.exprs = append(r.exprs, e...)
	return r
}

// reg is the 32-bit register holding the byte at offset off of a concatenation.
func reg(off uint32) uint32 { return unix.NFT_REG32_00 + off/4 }

func native32(v uint32) []byte { return binary.NativeEndian.AppendUint32(nil, v) }

// Offsets of the addresses in the network header.
func (l *nftLayout) daddrOffset() uint32 {
	if l.v6 {
		return 24
	}
	return 16
}

func (l *nftLayout) saddrOffset() uint32 {
	if l.v6 {
		return 8
	}
	return 12
}

// ipDaddr is `ip daddr`, the key of a lookup in a set of addresses.
func (r *nftRule) ipDaddr() *nftRule {
	return r.add(&expr.Payload{DestRegister: reg(0), Base: expr.PayloadBaseNetworkHeader, Offset: r.l.daddrOffset(), Len: r.l.addrLen})
}

// portKey is `ip daddr . meta l4proto . th dport`: the Service port a packet is addressed to.
func (r *nftRule) portKey() *nftRule {
	return r.ipDaddr().add(
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg(r.l.addrLen)},
		&expr.Payload{DestRegister: reg(r.l.addrLen + 4), Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
	)
}

// ctOriginalPortKey is `ct original ip daddr . meta l4proto . ct original proto-dst`: the
// Service port a connection was addressed to, before DNAT.
func (r *nftRule) ctOriginalPortKey() *nftRule {
	return r.add(
		&expr.Ct{Key: expr.CtKeyDST, Direction: ctDirOriginal, Register: reg(0)},
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: reg(r.l.addrLen)},
		&expr.Ct{Key: expr.CtKeyPROTODST, Direction: ctDirOriginal, Register: reg(r.l.addrLen + 4)},
	)
}

// ctDirOriginal selects a conntrack entry's original direction (IP_CT_DIR_ORIGINAL).
const ctDirOriginal = 0

// dotIPSaddr is `. ip saddr` after a port key.
func (r *nftRule) dotIPSaddr() *nftRule {
	return r.add(&expr.Payload{DestRegister: reg(r.l.addrLen + 8), Base: expr.PayloadBaseNetworkHeader, Offset: r.l.saddrOffset(), Len: r.l.addrLen})
}

// dotNumgenRandomMod is `. numgen random mod k` after a port key.
func (r *nftRule) dotNumgenRandomMod(k int) *nftRule {
	return r.add(&expr.Numgen{Register: reg(r.l.addrLen + 8), Modulus: uint32(k), Type: unix.NFT_NG_RANDOM})
}

// dotJhashMod is `. jhash ip saddr . th sport mod buckets seed S` after a port key (`jhash ip
// saddr mod ...` without the port): the flow's steering bucket. The source fields are loaded
// behind the bucket's register; a 2-byte port is zero-padded to its register, as nft does.
func (r *nftRule) dotJhashMod(withPort bool, buckets, seed uint32) *nftRule {
	src := r.l.addrLen + 12
	r.add(&expr.Payload{DestRegister: reg(src), Base: expr.PayloadBaseNetworkHeader, Offset: r.l.saddrOffset(), Len: r.l.addrLen})
	n := r.l.addrLen
	if withPort {
		r.add(&expr.Payload{DestRegister: reg(src + r.l.addrLen), Base: expr.PayloadBaseTransportHeader, Offset: 0, Len: 2})
		n += 4
	}
	return r.add(&expr.Hash{SourceRegister: reg(src), DestRegister: reg(r.l.addrLen + 8), Length: n,
		Modulus: buckets, Seed: seed, Type: expr.HashTypeJenkins})
}

// markSetFromMap is `meta mark set <key> map @m`: the mark is the data of the key loaded so far.
func (r *nftRule) markSetFromMap(m *nftables.Set) *nftRule {
	return r.add(
		&expr.Lookup{SourceRegister: reg(0), DestRegister: reg(0), IsDestRegSet: true, SetName: m.Name, SetID: m.ID},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: reg(0)},
	)
}

// notrack is `notrack`: conntrack leaves the packet alone.
func (r *nftRule) notrack() *nftRule { return r.add(&expr.Notrack{}) }

// in is `@s`: the key is an element of s.
func (r *nftRule) in(s *nftables.Set) *nftRule {
	return r.add(&expr.Lookup{SourceRegister: reg(0), SetName: s.Name, SetID: s.ID})
}

// notIn is `!= @s`: the key is no element of s.
func (r *nftRule) notIn(s *nftables.Set) *nftRule {
	return r.add(&expr.Lookup{SourceRegister: reg(0), SetName: s.Name, SetID: s.ID, Invert: true})
}

// ctStateUntracked is `ct state untracked`.
func (r *nftRule) ctStateUntracked() *nftRule {
	return r.add(
		&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(expr.CtStateBitUNTRACKED), Xor: native32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)},
	)
}

// l4protoTCP is `meta l4proto tcp`.
func (r *nftRule) l4protoTCP() *nftRule {
	return r.add(
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
	)
}

// markHasOurs is `meta mark & MARK != 0`, MARK being the plane's mark bit.
func (r *nftRule) markHasOurs() *nftRule {
	return r.add(
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(r.l.mark), Xor: native32(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native32(0)},
	)
}

// orMark is `meta mark set meta mark | MARK`.
func (r *nftRule) orMark() *nftRule {
	return r.add(
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(^r.l.mark), Xor: native32(r.l.mark)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	)
}

// andNotMark is `meta mark set meta mark & ~MARK`.
func (r *nftRule) andNotMark() *nftRule {
	return r.add(
		&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4, Mask: native32(^r.l.mark), Xor: native32(0)},
		&expr.Meta{Key: expr.MetaKeyMARK, SourceRegister: true, Register: 1},
	)
}

// counter is `counter`.
func (r *nftRule) counter() *nftRule { return r.add(&expr.Counter{}) }

// masqueradeFullyRandom is `masquerade fully-random`.
func (r *nftRule) masqueradeFullyRandom() *nftRule { return r.add(&expr.Masq{FullyRandom: true}) }

// dnatToMap is `dnat ip to <key> map @m`: the key loaded so far maps to the address and port
// to translate to.
func (r *nftRule) dnatToMap(m *nftables.Set) *nftRule {
	nfproto := uint32(unix.NFPROTO_IPV4)
	if r.l.v6 {
		nfproto = unix.NFPROTO_IPV6
	}
	return r.add(
		&expr.Lookup{SourceRegister: reg(0), DestRegister: reg(0), IsDestRegSet: true, SetName: m.Name, SetID: m.ID},
		&expr.NAT{Type: expr.NATTypeDestNAT, Family: nfproto, RegAddrMin: reg(0), RegProtoMin: reg(r.l.addrLen), Specified: true},
	)
}

// updateToDaddrDport is `update @m { <key> timeout T : ip daddr . th dport }`: it adds or
// renews the element of the key loaded so far (a port key and an address), its data the
// packet's destination after DNAT, for secs seconds.
func (r *nftRule) updateToDaddrDport(m *nftables.Set, secs uint32) *nftRule {
	keyLen := r.l.addrLen*2 + 8
	return r.add(
		&expr.Payload{DestRegister: reg(keyLen), Base: expr.PayloadBaseNetworkHeader, Offset: r.l.daddrOffset(), Len: r.l.addrLen},
		&expr.Payload{DestRegister: reg(keyLen + r.l.addrLen), Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Dynset{SrcRegKey: reg(0), SrcRegData: reg(keyLen), SetName: m.Name, SetID: m.ID,
			Operation: unix.NFT_DYNSET_OP_UPDATE, Timeout: time.Duration(secs) * time.Second},
	)
}

// rejectTCPReset is `reject with tcp reset`.
func (r *nftRule) rejectTCPReset() *nftRule {
	return r.add(&expr.Reject{Type: unix.NFT_REJECT_TCP_RST})
}

// rejectPortUnreachable is `reject with icmp port-unreachable` (icmpv6 on IPv6).
func (r *nftRule) rejectPortUnreachable() *nftRule {
	code := uint8(3)
	if r.l.v6 {
		code = 4
	}
	return r.add(&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: code})
}

// jumpTo is `jump chain`.
func (r *nftRule) jumpTo(chain string) *nftRule {
	return r.add(&expr.Verdict{Kind: expr.VerdictJump, Chain: chain})
}

// thenReturn is `return`.
func (r *nftRule) thenReturn() *nftRule {
	return r.add(&expr.Verdict{Kind: expr.VerdictReturn})
}
