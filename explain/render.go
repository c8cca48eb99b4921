package explain

import (
	"fmt"
	"io"
	"strings"
	"time"
)

// Render prints r for a person, one screen for a Service or an address:
// each step with ✓ or ✗ and its reason, the nodes and groups under it.
// For an IPGroup or a node, one line per address.
func Render(w io.Writer, r Report) error {
	p := &printer{w: w}
	p.line(0, r.Subject)
	for _, pr := range r.Problems {
		p.line(1, "! "+pr)
	}
	switch kind, name, _ := strings.Cut(r.Subject, " "); kind {
	case "IPGroup":
		p.compact(r, "")
	case "Node":
		p.compact(r, name)
	default:
		if r.Allocation != nil {
			p.allocation(*r.Allocation)
		}
		for _, v := range r.VIPs {
			p.vip(v)
		}
	}
	if r.WhatIfDrain != nil {
		p.drain(*r.WhatIfDrain)
	}
	return p.err
}

// printer writes lines and keeps the first error.
type printer struct {
	w   io.Writer
	err error
}

func (p *printer) line(indent int, s string) {
	if p.err == nil {
		_, p.err = fmt.Fprintln(p.w, strings.Repeat("  ", indent)+s)
	}
}

func mark(ok bool) string {
	if ok {
		return "✓"
	}
	return "✗"
}

// step prints one numbered step.
func (p *printer) step(indent, n int, name string, c Check) {
	p.line(indent, fmt.Sprintf("%s %d %-13s %s", mark(c.OK), n, name, c.Reason))
}

func (p *printer) allocation(a Allocation) {
	p.step(0, 1, "allocation", a.Check)
	for _, g := range a.Groups {
		p.line(2, fmt.Sprintf("%s %-12s %s", mark(g.Admitted), g.Name, g.Reason))
	}
}

func (p *printer) vip(v VIP) {
	head := v.Address
	if v.Group != "" {
		head += fmt.Sprintf("  (IPGroup %s, %s)", v.Group, v.Mode)
	}
	p.line(0, head)
	p.step(1, 1, "ledger", v.Ledger.Check)
	p.step(1, 2, "election", v.Election.Check)
	for _, c := range v.Election.Nodes {
		m := mark(c.Chosen)
		if c.Eligible && !c.Chosen {
			m = "·"
		}
		reason := c.Reason
		if c.Chosen {
			reason = "chosen"
		}
		p.line(3, fmt.Sprintf("%s %-10s %s", m, c.Node, reason))
	}
	p.step(1, 3, "data path", v.DataPath.Check)
	for _, n := range v.DataPath.Nodes {
		p.nodePath(n)
	}
	p.step(1, 4, "announcement", v.Announcement.Check)
	for _, s := range v.Announcement.Sessions {
		sent, ok := "", s.State == bgpEstablished
		if s.Sent != nil {
			sent, ok = ", route not sent", ok && *s.Sent
			if *s.Sent {
				sent = ", route sent"
			}
		}
		p.line(3, fmt.Sprintf("%s %-10s peer %s %s, BFD %s%s", mark(ok), s.Node, s.Peer, s.State, orNone([]string{s.BFD}), sent))
	}
	p.step(1, 5, "history", v.History.Check)
	for _, f := range v.History.Entries {
		p.line(3, fmt.Sprintf("%s  %s -> %s  %s  %s", f.At.UTC().Format(time.RFC3339), f.From, f.To, f.Cause, gap(f)))
	}
}

func (p *printer) nodePath(n NodePath) {
	if len(n.Ports) == 0 {
		p.line(3, fmt.Sprintf("%s %-10s %s", mark(n.OK), n.Node, n.Reason))
		return
	}
	for _, pp := range n.Ports {
		got := "-> " + orNone(pp.Kernel)
		if strings.Join(pp.Kernel, ",") != strings.Join(pp.Want, ",") {
			got = fmt.Sprintf("kernel -> %s; ready endpoints: %s", orNone(pp.Kernel), orNone(pp.Want))
			p.line(3, fmt.Sprintf("✗ %-10s %s %s", n.Node, pp.Port, got))
			continue
		}
		p.line(3, fmt.Sprintf("✓ %-10s %s %s", n.Node, pp.Port, got))
	}
}

// compact prints one line per address; seen from node when node is not "".
func (p *printer) compact(r Report, node string) {
	if len(r.VIPs) == 0 {
		p.line(1, "no Service holds an address here")
	}
	for _, v := range r.VIPs {
		ok := v.Ledger.OK && v.Election.OK && v.DataPath.OK && v.Announcement.OK
		who := orNone(carriers(v.Election))
		if node != "" {
			who, ok = p.seenFrom(v, node)
		}
		p.line(1, fmt.Sprintf("%s %-15s data path %s  announcement %s  %d move(s)  %s", mark(ok), v.Address,
			mark(v.DataPath.OK), mark(v.Announcement.OK), len(v.History.Entries), who))
	}
}

// seenFrom is v from node: carried by it, or why not.
func (p *printer) seenFrom(v VIP, node string) (string, bool) {
	for _, c := range v.Election.Nodes {
		if c.Node != node {
			continue
		}
		if c.Chosen {
			return "carried by " + node, true
		}
		return "carried by " + orNone(carriers(v.Election)) + "; " + node + ": " + c.Reason, v.Election.OK
	}
	return "carried by " + orNone(carriers(v.Election)), v.Election.OK
}

func (p *printer) drain(d Drain) {
	p.line(0, "What if "+d.Node+" drains (cordon, exclusion label, agent stopped):")
	if len(d.Moves) == 0 {
		p.line(1, "no address moves")
	}
	for _, m := range d.Moves {
		p.line(1, fmt.Sprintf("%-15s %s -> %s", m.Address, orNone(m.From), orNone(m.To)))
	}
}
