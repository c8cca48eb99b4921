package dataplane

import (
	"fmt"
	"net/netip"
	"slices"
)

// Return marks: on a node with several networks, the reply to a VIP's request must leave by the
// interface the request came in on, to the router it came from, while the main routing table
// sends it by the default route, often the other network. Routing cannot tell a reply from
// anything else, conntrack can: the first packet of a connection to a VIP arriving on interface
// X stores X's mark in the connection's mark, and every later packet of that connection, both
// ways, carries it as its packet mark. Policy routing (package returnpath) sends marked packets
// by X's own table. The request's packets carry the mark too, so a strict reverse-path filter
// judges them by that table as well (the kernel honours the mark there with src_valid_mark).
//
// Both planes write it the same way, in iptables' mangle table (chain VIPA-RETURN, jumped to
// from PREROUTING and OUTPUT, before nat and routing), as they write the connection handoff:
// its rules name interfaces and the groups' prefixes, never a VIP, so their count does not
// grow with the Services. In iptables-save's words (one interface):
//
//	-A VIPA-RETURN -d 192.0.2.0/24 -i eth1 -m addrtype ! --dst-type LOCAL -m conntrack --ctstate NEW -j CONNMARK --set-xmark 0x1000000/0xf000000
//	-A VIPA-RETURN -m connmark --mark 0x0/0xf000000 -j RETURN
//	-A VIPA-RETURN -m connmark --mark 0x1000000/0xf000000 -j MARK --set-xmark 0x1000000/0xf000000
//
// A node whose VIPs all arrive by the interface of its default route needs none: nothing is
// written, and its mangle table stays as it was.

const chainReturn = "VIPA-RETURN" // mangle: the return mark of connections to VIPs

var returnJumps = []jump{{"mangle", "PREROUTING", chainReturn}, {"mangle", "OUTPUT", chainReturn}}

// ReturnMark marks the connections to VIPs that arrive on one interface.
type ReturnMark struct {
	Interface string
	// Mark is the interface's value within Mask, the bits of the connection and packet
	// marks the return marks own.
	Mark, Mask uint32
	// Destinations are the prefixes of the VIP groups reachable on the interface. The
	// node's own addresses are never marked, even inside them.
	Destinations []netip.Prefix
}

// renderReturnMarks spells the mangle section that makes VIPA-RETURN hold marks, for fam's
// destinations only. The chain is flushed and refilled.
func renderReturnMarks(fam Family, marks []ReturnMark) string {
	b := []byte("*mangle\n:" + chainReturn + " - [0:0]\n")
	for _, m := range marks {
		for _, dst := range m.Destinations {
			if !fam.matches(dst.Addr()) {
				continue
			}
			b = fmt.Appendf(b, "-A %s -d %s -i %s -m addrtype ! --dst-type LOCAL -m conntrack --ctstate NEW -j CONNMARK --set-xmark %#x/%#x\n",
				chainReturn, dst.Masked(), m.Interface, m.Mark, m.Mask)
		}
	}
	if len(marks) > 0 {
		// Most packets belong to no VIP's connection: one rule sends them on.
		b = fmt.Appendf(b, "-A %s -m connmark --mark 0x0/%#x -j RETURN\n", chainReturn, marks[0].Mask)
	}
	for _, m := range marks {
		b = fmt.Appendf(b, "-A %s -m connmark --mark %#x/%#x -j MARK --set-xmark %#x/%#x\n", chainReturn, m.Mark, m.Mask, m.Mark, m.Mask)
	}
	return string(append(b, "COMMIT\n"...))
}

// SetReturnMarks makes VIPA-RETURN hold exactly marks, for this plane's family. Nothing is
// written while marks is empty and nothing was ever written, so a node with one network keeps
// its mangle table untouched.
func (d *IPTables) SetReturnMarks(marks []ReturnMark) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	payload := renderReturnMarks(d.cfg.Family, marks)
	switch {
	case !d.returnTouched && len(marks) == 0:
		return nil
	case d.returnMarks == payload:
		return nil
	}
	d.returnTouched = true
	d.returnMarks = "" // unknown until written
	if err := restore(d.bins, func(w sink) { w.WriteString(payload) }); err != nil {
		return fmt.Errorf("write %s: %w", chainReturn, err)
	}
	present, err := d.listJumps(returnJumps, nil)
	for _, j := range returnJumps {
		if err == nil && !present[j] {
			err = d.ipt.Insert(j.table, j.from, 1, append(SplitRule(jumpSpec), "-j", chainReturn)...)
		}
	}
	if err != nil {
		return fmt.Errorf("jump to %s: %w", chainReturn, err)
	}
	d.returnMarks = payload
	return nil
}

// forgetMangle makes the next SetHandoffs and SetReturnMarks rewrite their chains (drift
// repair).
func (d *IPTables) forgetMangle() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.handoffs, d.returnMarks = nil, ""
}

// returnMarksInPlace reports false when VIPA-RETURN should hold marks and a jump to it is
// gone (drift: the caller's full Sync then rewrites it). The caller holds d.mu.
func (d *IPTables) returnMarksInPlace() bool {
	if !d.returnTouched || d.returnMarks == "" {
		return true
	}
	present, err := d.listJumps(returnJumps, nil)
	if err != nil {
		return false
	}
	for _, j := range returnJumps {
		if !present[j] {
			return false
		}
	}
	ok, err := d.ipt.ChainExists("mangle", chainReturn)
	return err == nil && ok
}

// SetReturnMarks writes the return marks into iptables, as the connection handoff (see
// NFTables).
func (n *NFTables) SetReturnMarks(marks []ReturnMark) error {
	if n.handoff == nil {
		if len(marks) == 0 {
			return nil
		}
		return fmt.Errorf("return marks need iptables: %w", n.handoffErr)
	}
	return n.handoff.SetReturnMarks(marks)
}

// mangleChains are the chains of iptables' mangle table both planes write, with their jumps.
var mangleChains = map[string][]jump{chainHandoff: {handoffJump}, chainReturn: returnJumps}

// sortedMangleChains lists mangleChains' names in a fixed order.
func sortedMangleChains() []string {
	names := make([]string, 0, len(mangleChains))
	for c := range mangleChains {
		names = append(names, c)
	}
	slices.Sort(names)
	return names
}

// mangleInPlace is returnMarksInPlace for the nftables plane, which holds no lock of d's.
func (d *IPTables) mangleInPlace() bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.returnMarksInPlace()
}
