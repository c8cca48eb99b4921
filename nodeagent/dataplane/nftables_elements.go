package dataplane

import (
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/paas-org/vip-allocator-operator/internal/steering"
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
// of Service ports with (id - setEndpoints + 1) endpoints, ids from setAffinity on the sets of
// Service ports with session affinity of (id - setAffinity) seconds.
type setID uint32

const (
	setVIPs        setID = iota // VIP: anything addressed to one and not DNATed is rejected
	setRestricted               // Service port key: ports with loadBalancerSourceRanges
	setAllowed                  // Service port key . source range (interval): who may use them
	setMasquerade               // Service port key: policy Cluster, masquerade all
	setHairpin                  // Service port key . local endpoint: policy Local, masquerade only hairpin
	setSteer                    // Service port key . bucket : mark of the serving node (steering.go)
	setSteerClient              // Service port key: steered by the client's address alone (sessionAffinity)
	setEndpoints                // Service port key . index : endpoint . port, for 1 endpoint; +1 per more

	setAffinity setID = 1 << 24 // Service port key: ports with session affinity of 0 s; +1 per second
	// setClients is the map of the clients of ports with session affinity, filled by the
	// kernel: Service port key . client : endpoint . port. It holds no Service's elements and
	// is never double-buffered (see writeFull): a full Sync must not forget the clients.
	setClients = setAffinity
)

// affinitySet is the set of Service ports with session affinity of secs seconds.
func affinitySet(secs uint32) setID { return setAffinity + setID(secs) }

// affinitySeconds is the session affinity of an affinity set's ports, 0 for the other sets.
func (id setID) affinitySeconds() uint32 {
	if id < setAffinity {
		return 0
	}
	return uint32(id - setAffinity)
}

// endpointsSet is the map of Service ports with k endpoints.
func endpointsSet(k int) setID { return setEndpoints + setID(k-1) }

// endpointCount is k for an endpoint map, 0 for the other sets.
func (id setID) endpointCount() int {
	if id < setEndpoints || id >= setAffinity {
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
	case setSteer:
		return "steer"
	case setSteerClient:
		return "steer_client"
	}
	if id == setClients {
		return nftClientsMap
	}
	if secs := id.affinitySeconds(); secs > 0 {
		return "affinity_" + strconv.Itoa(int(secs))
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

// elemRenderer spells the elements of one family's Services. Which Services, endpoints and
// source ranges they hold is decided in targets.go, as for the iptables plane, so both planes
// serve exactly the same endpoints.
type elemRenderer struct {
	family        Family
	steer         *steerView // nil: no Service is steered
	targets       []target   // scratch for appendPortTargets
	key, idx, val []byte     // scratch
}

func newElemRenderer(fam Family, steer *steerView) *elemRenderer {
	return &elemRenderer{family: fam, steer: steer}
}

// appendPortKey appends the Service port key of vip, protocol number pn and port.
func appendPortKey(b []byte, vip netip.Addr, pn byte, port uint16) []byte {
	b = append(b, vip.AsSlice()...)
	b = append(b, pn, 0, 0, 0)
	b = binary.BigEndian.AppendUint16(b, port)
	return append(b, 0, 0)
}

// serviceElements appends every element Service s needs in this family to out, encoded as
// records (see appendElem). ports says which Service port keys are taken, by whom
// (namespace/name): a port another Service already serves is skipped, so two Services
// claiming one VIP:port never write conflicting elements.
func (e *elemRenderer) serviceElements(s *Service, ports map[string]string, owner string, out []byte) []byte {
	fam := e.family
	var vips []netip.Addr // a slice, not a map: the order must not change between Syncs
	for _, vip := range s.VIPs {
		if vip = vip.Unmap(); fam.matches(vip) && !slices.Contains(vips, vip) {
			vips = append(vips, vip)
			out = appendElem(out, setVIPs, vip.AsSlice(), nil, nil, nil, nil)
		}
	}
	if !reachable(fam, s) {
		return out // its VIPs are rejected (set vips), as the iptables plane does
	}
	ranges := disjointRanges(fam, s.SourceRanges)
	for _, p := range s.Ports {
		pn := protoNumber(p.Protocol)
		if pn == 0 {
			continue
		}
		steered := e.steer != nil && s.Steer
		var table steering.Table
		if steered {
			// Serving DNATs to this node's own endpoints only; the others' flows are
			// steered to them before conntrack sees them.
			table = e.steer.tables.Build(portNodes(fam, s, p), steerBuckets)
			e.targets = appendLocalPortTargets(e.targets[:0], fam, s, p)
		} else {
			e.targets = appendPortTargets(e.targets[:0], fam, s, p)
		}
		eps := e.targets
		if len(eps) == 0 && len(table.Buckets) == 0 {
			continue // not DNATed: the filter rejects it
		}
		for _, vip := range vips {
			key := appendPortKey(e.key[:0], vip, pn, p.Port)
			e.key = key
			if o, ok := ports[string(key)]; !ok {
				ports[string(key)] = owner
			} else if o != owner {
				continue
			}
			if len(s.SourceRanges) > 0 {
				out = appendElem(out, setRestricted, key, nil, nil, nil, nil)
				for _, src := range ranges {
					first, last := prefixBounds(src)
					out = appendElem(out, setAllowed, key, first.AsSlice(), key, last.AsSlice(), nil)
				}
			}
			if steered {
				out = e.steer.appendElements(out, key, table, s.Affinity > 0)
			}
			if s.Local || steered {
				// Source kept, except when an endpoint reaches its own Service through the VIP
				// (hairpin): without masquerade its reply would bypass the DNAT.
				for i, ep := range eps {
					if i == 0 || ep.addr != eps[i-1].addr {
						out = appendElem(out, setHairpin, key, ep.addr.AsSlice(), nil, nil, nil)
					}
				}
			} else {
				out = appendElem(out, setMasquerade, key, nil, nil, nil, nil)
			}
			if secs := affinitySecs(s.Affinity); secs > 0 {
				out = appendElem(out, affinitySet(secs), key, nil, nil, nil, nil)
			}
			if len(eps) == 0 {
				continue // every flow is steered away; a stray one is rejected
			}
			set := endpointsSet(len(eps))
			for i, ep := range eps {
				// numgen writes its number in host byte order.
				e.idx = binary.NativeEndian.AppendUint32(e.idx[:0], uint32(i))
				e.val = append(binary.BigEndian.AppendUint16(append(e.val[:0], ep.addr.AsSlice()...), ep.port), 0, 0)
				out = appendElem(out, set, key, e.idx, nil, nil, e.val)
			}
		}
	}
	return out
}

// affinitySecs is a session affinity in whole seconds, at least 1 when there is one.
func affinitySecs(d time.Duration) uint32 {
	if d <= 0 {
		return 0
	}
	return uint32(max(d/time.Second, 1))
}

// appendElem appends one element as a record: its set (4 bytes), then its key, its interval
// end and its data, each preceded by its length (1 byte; keys are at most 40 bytes), the key
// and the end each given in two parts. A Service's elements are kept as one string of such
// records: ~350 bytes per Service instead of ~1.5 KB as separate strings.
func appendElem(b []byte, set setID, key, keyTail, end, endTail, val []byte) []byte {
	b = binary.LittleEndian.AppendUint32(b, uint32(set))
	b = append(b, byte(len(key)+len(keyTail)))
	b = append(append(b, key...), keyTail...)
	b = append(b, byte(len(end)+len(endTail)))
	b = append(append(b, end...), endTail...)
	b = append(b, byte(len(val)))
	return append(b, val...)
}

// eachElem calls f for every element of records; the elements' strings are parts of records.
func eachElem(records string, f func(nftElem)) {
	for len(records) > 0 {
		e := nftElem{set: setID(records[0]) | setID(records[1])<<8 | setID(records[2])<<16 | setID(records[3])<<24} // see appendElem
		records = records[4:]
		for _, part := range []*string{&e.key, &e.end, &e.val} {
			n := int(records[0])
			*part, records = records[1:1+n], records[1+n:]
		}
		f(e)
	}
}

// portKey is the Service port key of an endpoint map element with index 0, else "": every
// Service port the plane serves has exactly one.
func (e nftElem) portKey() string {
	switch {
	case e.set == setSteerClient:
		return e.key
	case e.set == setSteer:
		return e.key[:len(e.key)-4] // a port steered whole has no endpoint map element
	case e.set.endpointCount() == 0 || e.key[len(e.key)-4:] != "\x00\x00\x00\x00":
		return ""
	}
	return e.key[:len(e.key)-4]
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
	if e.set == setSteer {
		fmt.Fprintf(&b, " : %#x", binary.NativeEndian.Uint32([]byte(e.val)))
	} else if e.val != "" {
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
	case set.endpointCount() > 0 || set == setSteer:
		n = len(k) - 12
	default:
		n = len(k) - 8
	}
	s := fmt.Sprintf("%s . %d . %d", addr(k[:n]), k[n], binary.BigEndian.Uint16(k[n+4:]))
	switch rest := k[n+8:]; {
	case set == setAllowed || set == setHairpin:
		s += " . " + addr(rest)
	case set.endpointCount() > 0 || set == setSteer:
		s += " . " + strconv.Itoa(int(binary.NativeEndian.Uint32(rest)))
	}
	return s
}
