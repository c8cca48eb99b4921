package dataplane

import (
	"fmt"
	"maps"
	"net/netip"
	"slices"
)

// This file writes the connection handoff (see handoff.go) into iptables' mangle table, for
// the iptables plane and the nftables plane alike.

const (
	chainHandoff = "VIPA-HANDOFF" // mangle: mid-stream TCP to a VIP -> its previous owner
)

var handoffJump = jump{"mangle", "PREROUTING", chainHandoff}

// renderHandoffs spells the mangle table section that makes VIPA-HANDOFF hand the mid-stream
// TCP segments of each VIP of fam to its previous owner. The chain is flushed and refilled.
func renderHandoffs(fam Family, h Handoffs) string {
	r := newRenderer(renderInput{Family: fam})
	var b []byte
	b = append(b, "*mangle\n:"+chainHandoff+" - [0:0]\n"...)
	vips := slices.SortedFunc(maps.Keys(h), netip.Addr.Compare)
	for _, vip := range vips {
		to := h[vip]
		if !fam.matches(vip) || !fam.matches(to) {
			continue
		}
		match := "-A " + chainHandoff + " -d " + vip.String() + r.hostBits +
			" -p tcp ! --syn -m conntrack --ctstate NEW,INVALID"
		b = append(b, match+" -j TEE --gateway "+to.String()+"\n"...)
		b = append(b, match+" -j DROP\n"...)
	}
	b = append(b, "COMMIT\n"...)
	return string(b)
}

// SetHandoffs makes VIPA-HANDOFF hand over exactly the VIPs of h of this Dataplane's family.
// Nothing is written while h is empty and nothing was ever handed over, so a node that never
// took a VIP over keeps its mangle table untouched.
func (d *IPTables) SetHandoffs(h Handoffs) error {
	d.mu.Lock()
	defer d.mu.Unlock()
	mine := Handoffs{}
	for vip, to := range h {
		if vip.Unmap().Is4() == (d.cfg.Family == IPv4) {
			mine[vip.Unmap()] = to.Unmap()
		}
	}
	switch {
	case !d.handoffTouched && len(mine) == 0:
		return nil
	case d.handoffs != nil && maps.Equal(mine, d.handoffs):
		return nil
	}
	d.handoffTouched = true
	payload := renderHandoffs(d.cfg.Family, mine)
	d.handoffs = nil // unknown until written
	if err := restore(d.bins, func(w sink) { w.WriteString(payload) }); err != nil {
		return fmt.Errorf("write %s: %w", chainHandoff, err)
	}
	present, err := d.listJumps([]jump{handoffJump}, nil)
	if err == nil && !present[handoffJump] {
		err = d.ipt.Insert(handoffJump.table, handoffJump.from, 1, append(SplitRule(jumpSpec), "-j", chainHandoff)...)
	}
	if err != nil {
		return fmt.Errorf("jump to %s: %w", chainHandoff, err)
	}
	d.handoffs = mine
	return nil
}
