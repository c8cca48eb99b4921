package dataplane

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"fmt"
	"net/netip"
	"slices"
	"strconv"
	"strings"

	"github.com/google/nftables"
)

// Reading back what the kernel holds for some VIPs, for a person asking why
// one does not answer (vip-allocator explain): never the plane's memory of
// what it wrote, which is what a hand-deleted element or a flushed chain
// makes wrong.

// Held is one Service port of a VIP as the kernel DNATs it.
type Held struct {
	VIP       netip.Addr
	Protocol  Protocol
	Port      uint16
	Endpoints []netip.AddrPort // sorted
}

// HeldReader is a Plane that reads back from the kernel what it holds.
type HeldReader interface {
	// Held reads the endpoints of every Service port of vips (those of the
	// plane's family) from the kernel.
	Held(vips []netip.Addr) ([]Held, error)
}

// Held reads the endpoint maps of the generation the rules use (see
// writeFull); before the first full Sync there is none and it holds nothing.
func (n *NFTables) Held(vips []netip.Addr) ([]Held, error) {
	n.mu.Lock()
	gen := n.gen
	n.mu.Unlock()
	if gen == "" {
		return nil, nil
	}
	c, err := nftConn()
	if err != nil {
		return nil, err
	}
	sets, err := c.GetSets(n.layout.table)
	if err != nil {
		return nil, fmt.Errorf("list the sets of table %s: %w", n.layout.table.Name, err)
	}
	held := heldPorts{}
	for _, s := range sets {
		if !strings.HasPrefix(s.Name, "endpoints_") || !strings.HasSuffix(s.Name, "_"+gen) {
			continue
		}
		elems, err := c.GetSetElements(s)
		if err != nil {
			return nil, fmt.Errorf("list map %s: %w", s.Name, err)
		}
		for _, e := range elems {
			held.addNFT(n.layout.addrLen, e, vips)
		}
	}
	return held.list(), nil
}

// heldPorts gathers endpoints by VIP, protocol and port.
type heldPorts map[heldKey][]netip.AddrPort

// heldKey is one Service port of a VIP.
type heldKey struct {
	vip   netip.Addr
	proto Protocol
	port  uint16
}

// addNFT adds one endpoint map element (key: VIP . protocol . port . index,
// data: endpoint . port, see serviceElements) when its VIP is among vips.
func (h heldPorts) addNFT(addrLen uint32, e nftables.SetElement, vips []netip.Addr) {
	n := int(addrLen)
	if len(e.Key) != n+12 || len(e.Val) != n+4 {
		return
	}
	vip, _ := netip.AddrFromSlice(e.Key[:n])
	if !slices.Contains(vips, vip) {
		return
	}
	ep, _ := netip.AddrFromSlice(e.Val[:n])
	k := heldKey{vip: vip, proto: protocolNamed(e.Key[n]), port: binary.BigEndian.Uint16(e.Key[n+4 : n+6])}
	h[k] = append(h[k], netip.AddrPortFrom(ep, binary.BigEndian.Uint16(e.Val[n:n+2])))
}

// list is h sorted by VIP, protocol and port, each one's endpoints sorted.
func (h heldPorts) list() []Held {
	out := make([]Held, 0, len(h))
	for k, eps := range h {
		slices.SortFunc(eps, netip.AddrPort.Compare)
		out = append(out, Held{VIP: k.vip, Protocol: k.proto, Port: k.port, Endpoints: slices.Compact(eps)})
	}
	slices.SortFunc(out, func(a, b Held) int {
		if c := a.VIP.Compare(b.VIP); c != 0 {
			return c
		}
		if c := strings.Compare(string(a.Protocol), string(b.Protocol)); c != 0 {
			return c
		}
		return int(a.Port) - int(b.Port)
	})
	return out
}

// protocolNamed is the protocol of IP protocol number pn.
func protocolNamed(pn byte) Protocol {
	for _, p := range []Protocol{TCP, UDP, SCTP} {
		if protoNumber(p) == pn {
			return p
		}
	}
	return Protocol(strconv.Itoa(int(pn)))
}

// Held reads the nat table back with iptables-save.
func (p *IPTables) Held(vips []netip.Addr) ([]Held, error) {
	out, err := run(p.bins.save, "-t", "nat")
	if err != nil {
		return nil, err
	}
	return parseHeld(out, vips), nil
}

// parseHeld reads, from an iptables-save of the nat table, the Service ports
// of vips: VIPA-SERVICES jumps VIP:port to a port chain, whose DNAT rules
// name the endpoints (see serviceJump and dnatRules).
func parseHeld(save []byte, vips []netip.Addr) []Held {
	ports := map[string][]heldKey{} // by port chain
	var dnats [][2]string           // chain, endpoint
	sc := bufio.NewScanner(bytes.NewReader(save))
	sc.Buffer(make([]byte, 0, 64*1024), 1024*1024)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != "-A" || !strings.HasPrefix(f[1], chainPrefix) {
			continue
		}
		if f[1] == chainServices {
			if k, chain, ok := serviceJumpOf(f, vips); ok {
				ports[chain] = append(ports[chain], k)
			}
			continue
		}
		if ep := flagValue(f, "--to-destination"); ep != "" && strings.HasPrefix(f[1], svcChainStem) {
			dnats = append(dnats, [2]string{f[1], ep})
		}
	}
	held := heldPorts{}
	for _, d := range dnats {
		ep, err := netip.ParseAddrPort(d[1])
		if err != nil {
			continue
		}
		for _, k := range ports[d[0]] {
			held[k] = append(held[k], ep)
		}
	}
	return held.list()
}

// serviceJumpOf reads one VIPA-SERVICES rule: the VIP, protocol and port it
// sends to which chain, when the VIP is among vips.
func serviceJumpOf(f []string, vips []netip.Addr) (heldKey, string, bool) {
	dst, err := netip.ParsePrefix(flagValue(f, "-d"))
	if err != nil || !slices.Contains(vips, dst.Addr()) {
		return heldKey{}, "", false
	}
	port, err := strconv.ParseUint(flagValue(f, "--dport"), 10, 16)
	if err != nil {
		return heldKey{}, "", false
	}
	return heldKey{vip: dst.Addr(), proto: Protocol(strings.ToUpper(flagValue(f, "-p"))), port: uint16(port)}, flagValue(f, "-j"), true
}

// flagValue is the word after flag in f ("" when absent).
func flagValue(f []string, flag string) string {
	if i := slices.Index(f, flag); i >= 0 && i+1 < len(f) {
		return f[i+1]
	}
	return ""
}
