package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
)

// This file turns Services into the elements of the nftables plane's sets and maps (pure: no
// I/O). Every Service port is data, never a rule: the kernel revalidates the rules reachable
// from a hook on every commit that adds one, but not set elements, so a Service change is a
// small transaction whatever the number of Services.
//
// A "Service port key" is the concatenation VIP . protocol . port, laid out as the kernel
// lays out the registers of `ip daddr . meta l4proto . th dport`: every field padded to 4
// bytes, the protocol in the first byte of its word, the port in network order.

// setID names one of the plane's sets and maps; ids from setEndpoints on are the endpoint maps
// of Service ports with (id - setEndpoints + 1) endpoints.
type setID uint32

const (
	setVIPs       setID = iota // VIP: anything addressed to one and not DNATed is rejected
	setRestricted              // Service port key: ports with loadBalancerSourceRanges
	setAllowed                 // Service port key . source range (interval): who may use them
	setMasquerade              // Service port key: policy Cluster, masquerade all
	setHairpin                 // Service port key . local endpoint: policy Local, masquerade only hairpin
	setEndpoints               // Service port key . index : endpoint . port, for 1 endpoint; +1 per more
)

// endpointsSet is the map of Service ports with k endpoints.
func endpointsSet(k int) setID { return setEndpoints + setID(k-1) }

// endpointCount is k for an endpoint map, 0 for the other sets.
func (id setID) endpointCount() int {
	if id < setEndpoints {
		return 0
	}
	return int(id-setEndpoints) + 1
}

func (id setID) String() string {
	switch id {
	case setVIPs:
		return "vips"
	case setRestricted:
		return "restricted"
	case setAllowed:
		return "allowed"
	case setMasquerade:
		return "masquerade"
	case setHairpin:
		return "hairpin"
	}
	return "endpoints_" + strconv.Itoa(id.endpointCount())
}

// nftElem is one element as the kernel holds it: key (and, for an interval, its last key) and,
// for a map, the data. Strings keep the bytes immutable and comparable.
type nftElem struct {
	set           setID
	key, end, val string
}

// protoNumber is the IP protocol number of p; 0 for a protocol the plane cannot DNAT.
func protoNumber(p Protocol) byte {
	switch proto(p) {
	case TCP:
		return 6
	case UDP:
		return 17
	case SCTP:
		return 132
	}
	return 0
}

// elemRenderer spells the elements of one family's Services. It reuses the iptables
// renderer's endpoint selection, so both planes serve exactly the same endpoints.
type elemRenderer struct {
	r   *renderer
	buf []byte // scratch for keys
}

func newElemRenderer(fam Family) *elemRenderer {
	return &elemRenderer{r: newRenderer(renderInput{Family: fam})}
}

// appendPortKey appends the Service port key of vip, protocol number pn and port.
func appendPortKey(b []byte, vip netip.Addr, pn byte, port uint16) []byte {
	b = append(b, vip.AsSlice()...)
	b = append(b, pn, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, port)
	return append(b, 0, 0)
}

// serviceElements appends every element Service s needs in this family to out. ports says
// which Service port keys are taken, by whom (namespace/name): a port another Service already
// serves is skipped, so two Services claiming one VIP:port never write conflicting elements.
// It returns the Service port keys s took.
func (e *elemRenderer) serviceElements(s *Service, ports map[string]string, owner string, out []nftElem) ([]nftElem, []string) {
	r := e.r
	if !r.reachable(s) {
		return out, nil
	}
	var taken []string
	ranges := disjointRanges(r, s.SourceRanges)
	var vips []netip.Addr // a slice, not a map: the order must not change between Syncs
	for _, vip := range s.VIPs {
		if vip = vip.Unmap(); r.ofFamily(vip) && !slices.Contains(vips, vip) {
			vips = append(vips, vip)
			out = append(out, nftElem{set: setVIPs, key: string(vip.AsSlice())})
		}
	}
	for _, p := range s.Ports {
		pn := protoNumber(p.Protocol)
		if pn == 0 {
			continue
		}
		eps := r.portTargets(s, p)
		if len(eps) == 0 {
			continue // not DNATed: the filter rejects it
		}
		for _, vip := range vips {
			e.buf = appendPortKey(e.buf[:0], vip, pn, p.Port)
			key := string(e.buf)
			if o, ok := ports[key]; ok && o != owner {
				continue
			}
			ports[key] = owner
			taken = append(taken, key)
			if len(s.SourceRanges) > 0 {
				out = append(out, nftElem{set: setRestricted, key: key})
				for _, src := range ranges {
					first, last := prefixBounds(src)
					out = append(out, nftElem{set: setAllowed, key: key + string(first.AsSlice()), end: key + string(last.AsSlice())})
				}
			}
			if s.Local {
				// Source kept, except when an endpoint reaches its own Service through the VIP
				// (hairpin): without masquerade its reply would bypass the DNAT.
				for i, ep := range eps {
					if i == 0 || ep.addr != eps[i-1].addr {
						out = append(out, nftElem{set: setHairpin, key: key + string(ep.addr.AsSlice())})
					}
				}
			} else {
				out = append(out, nftElem{set: setMasquerade, key: key})
			}
			set := endpointsSet(len(eps))
			for i, ep := range eps {
				// numgen writes its number in host byte order.
				k := binary.NativeEndian.AppendUint32(e.buf, uint32(i))
				v := binary.BigEndian.AppendUint16(ep.addr.AsSlice(), ep.port)
				out = append(out, nftElem{set: set, key: string(k), val: string(append(v, 0, 0))})
			}
		}
	}
	return out, taken
}

// disjointRanges are the source ranges of this family, masked, without those inside another:
// an interval set refuses overlapping elements. (Prefixes nest or are disjoint.)
func disjointRanges(r *renderer, in []netip.Prefix) []netip.Prefix {
	var out []netip.Prefix
	for _, p := range in {
		if p.IsValid() && r.ofFamily(p.Addr()) {
			out = append(out, p.Masked())
		}
	}
	// Shorter prefixes first, so a prefix is compared with every wider one kept before it.
	slices.SortFunc(out, func(a, b netip.Prefix) int {
		if c := a.Bits() - b.Bits(); c != 0 {
			return c
		}
		return a.Addr().Compare(b.Addr())
	})
	kept := out[:0]
	for _, p := range out {
		if !slices.ContainsFunc(kept, func(k netip.Prefix) bool { return k.Contains(p.Addr()) }) {
			kept = append(kept, p)
		}
	}
	return kept
}

// prefixBounds is the first and last address of p.
func prefixBounds(p netip.Prefix) (netip.Addr, netip.Addr) {
	p = p.Masked()
	first := p.Addr()
	b := first.AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	last, _ := netip.AddrFromSlice(b)
	return first, last
}

// String spells an element as nft lists it (with the protocol as a number), for tests and logs.
func (e nftElem) String() string {
	var b strings.Builder
	b.WriteString(e.set.String() + " ")
	b.WriteString(spellKey(e.set, e.key))
	if e.end != "" {
		b.WriteString("-" + spellKey(e.set, e.end))
	}
	if e.val != "" {
		v := []byte(e.val)
		a, _ := netip.AddrFromSlice(v[:len(v)-4])
		b.WriteString(" : " + a.String() + " . " + strconv.Itoa(int(binary.BigEndian.Uint16(v[len(v)-4:]))))
	}
	return b.String()
}

func spellKey(set setID, key string) string {
	k := []byte(key)
	addr := func(b []byte) string { a, _ := netip.AddrFromSlice(b); return a.String() }
	var n int // address length
	switch {
	case set == setVIPs:
		return addr(k)
	case set == setAllowed || set == setHairpin:
		n = (len(k) - 8) / 2
	case set.endpointCount() > 0:
		n = len(k) - 12
	default:
		n = len(k) - 8
	}
	s := fmt.Sprintf("%s . %d . %d", addr(k[:n]), k[n], binary.BigEndian.Uint16(k[n+4:]))
	switch rest := k[n+8:]; {
	case set == setAllowed || set == setHairpin:
		s += " . " + addr(rest)
	case set.endpointCount() > 0:
		s += " . " + strconv.Itoa(int(binary.NativeEndian.Uint32(rest)))
	}
	return s
}
