package dataplane

import (
	"crypto/sha256"
	"encoding/base32"
	"fmt"
	"io"
	"net/netip"
	"strconv"
	"time"
)

// This file spells the iptables plane's rules of each chain; iptables_render.go assembles
// them into a payload. Which endpoints and source ranges the rules name is decided in
// targets.go, shared with the nftables plane.

// sink is where rules are spelled: the pipe to iptables-restore (*bufio.Writer), or a scratch
// *bytes.Buffer whose content is only hashed to see whether a Service's rules changed. At
// 10,000 Services a partial Sync spells ~140,000 rules just to compare them, so nothing here
// allocates per rule.
type sink interface {
	io.Writer
	io.StringWriter
	io.ByteWriter
}

// svcChainName names the chain of one Service port. Hashing keeps the name within iptables'
// 28 characters and stable across agent restarts, so a restart rewrites the same chains
// (kube-proxy's scheme).
func svcChainName(ns, name string, p Port, fam Family) string {
	h := sha256.Sum256([]byte(ns + "/" + name + "/" + p.Name + "/" + string(proto(p.Protocol)) + "/" + string(fam)))
	var enc [56]byte
	base32.StdEncoding.Encode(enc[:], h[:])
	return svcChainStem + string(enc[:16])
}

// iptProto is the iptables spelling of a protocol; "" for one iptables cannot DNAT.
func iptProto(p Protocol) string {
	switch proto(p) {
	case TCP:
		return "tcp"
	case UDP:
		return "udp"
	case SCTP:
		return "sctp"
	}
	return ""
}

// probabilities[n] is the --probability of the first of n remaining endpoints: 1/n, spelled
// as kube-proxy does. Computed once: FormatFloat showed up in profiles.
var probabilities = func() []string {
	p := make([]string, 128)
	for n := 2; n < len(p); n++ {
		p[n] = strconv.FormatFloat(1/float64(n), 'f', 10, 64)
	}
	return p
}()

func probability(n int) string {
	if n < len(probabilities) {
		return probabilities[n]
	}
	return strconv.FormatFloat(1/float64(n), 'f', 10, 64)
}

// renderer spells rules for one family. It keeps scratch space between calls, so it is used
// by one goroutine at a time.
type renderer struct {
	family    Family
	hostBits  string // "/32" or "/128"
	reject    string
	mark      string
	markMask  string
	randomFul bool

	targets []target // scratch for appendPortTargets
	tmp     []byte   // scratch for spelling addresses
}

func newRenderer(in renderInput) *renderer {
	r := &renderer{family: in.Family, hostBits: "/32", reject: "icmp-port-unreachable", randomFul: in.RandomFully}
	if in.Family == IPv6 {
		r.hostBits, r.reject = "/128", "icmp6-port-unreachable"
	}
	r.mark = fmt.Sprintf("%#x", in.Mark)
	r.markMask = r.mark + "/" + r.mark
	return r
}

// host writes "addr/32" (or /128).
func (r *renderer) host(w sink, a netip.Addr) {
	r.tmp = a.AppendTo(r.tmp[:0])
	w.Write(r.tmp)
	w.WriteString(r.hostBits)
}

// natTop writes the fixed masquerade chains.
func (r *renderer) natTop(w sink) int {
	w.WriteString("-A " + chainMasq + " -j MARK --or-mark " + r.mark + "\n")
	w.WriteString("-A " + chainPost + " -m mark ! --mark " + r.markMask + " -j RETURN\n")
	// Clear the bit so a packet that loops back through the stack is not masqueraded twice.
	w.WriteString("-A " + chainPost + " -j MARK --xor-mark " + r.mark + "\n")
	if r.randomFul {
		// Random source ports avoid the SNAT port race that drops SYNs under load.
		w.WriteString("-A " + chainPost + " -j MASQUERADE --random-fully\n")
	} else {
		w.WriteString("-A " + chainPost + " -j MASQUERADE\n")
	}
	return 4
}

// filterTop lets untracked packets pass: the copies a connection handoff sends on to a VIP's
// previous owner (TEE, see handoff.go) leave through OUTPUT still addressed to the VIP, and
// the rejects below would answer the client with a reset instead.
func (r *renderer) filterTop(w sink) int {
	w.WriteString("-A " + chainFilter + " -m conntrack --ctstate UNTRACKED -j RETURN\n")
	return 1
}

// filterVIP rejects what is still addressed to the VIP after nat (port not exposed, no
// endpoint, source not allowed), so clients are refused at once instead of timing out, and
// accepts DNATed traffic even when the FORWARD policy is DROP. TCP gets a reset: an ICMP
// error generated for a forwarded packet is not always delivered back (seen with nf_tables
// in network namespaces), and a reset is what a refused connection looks like anyway.
func (r *renderer) filterVIP(w sink, vip netip.Addr) int {
	w.WriteString("-A " + chainFilter + " -d ")
	r.host(w, vip)
	w.WriteString(" -p tcp -j REJECT --reject-with tcp-reset\n")
	w.WriteString("-A " + chainFilter + " -d ")
	r.host(w, vip)
	w.WriteString(" -j REJECT --reject-with ")
	w.WriteString(r.reject)
	w.WriteByte('\n')
	w.WriteString("-A " + chainFilter + " -m conntrack --ctorigdst ")
	r.host(w, vip)
	w.WriteString(" -j ACCEPT\n")
	return 3
}

// serviceJumps writes the VIPA-SERVICES rules of one Service port: one per VIP, or one per VIP
// and allowed source range. A Service whose ranges are all of the other family gets none: an
// allow-list that names nobody of this family allows nobody.
func (r *renderer) serviceJumps(w sink, s *Service, p Port, chain string) int {
	n := 0
	for _, vip := range s.VIPs {
		if vip = vip.Unmap(); !r.family.matches(vip) {
			continue
		}
		if len(s.SourceRanges) == 0 {
			n += r.serviceJump(w, s, p, chain, vip, netip.Prefix{})
		}
		for _, src := range s.SourceRanges {
			if src.IsValid() && r.family.matches(src.Addr()) {
				n += r.serviceJump(w, s, p, chain, vip, src.Masked())
			}
		}
	}
	return n
}

// serviceJump writes one VIPA-SERVICES rule; src is the zero Prefix for "from anywhere".
func (r *renderer) serviceJump(w sink, s *Service, p Port, chain string, vip netip.Addr, src netip.Prefix) int {
	pr := iptProto(p.Protocol)
	w.WriteString("-A " + chainServices)
	if src.IsValid() {
		w.WriteString(" -s ")
		r.tmp = src.AppendTo(r.tmp[:0])
		w.Write(r.tmp)
	}
	w.WriteString(" -d ")
	r.host(w, vip)
	w.WriteString(" -p ")
	w.WriteString(pr)
	w.WriteString(` -m comment --comment "`)
	w.WriteString(s.Namespace)
	w.WriteByte('/')
	w.WriteString(s.Name)
	w.WriteByte(':')
	if p.Name != "" {
		w.WriteString(p.Name)
	} else {
		r.port(w, p.Port)
	}
	w.WriteString(`" -m `)
	w.WriteString(pr)
	w.WriteString(" --dport ")
	r.port(w, p.Port)
	w.WriteString(" -j ")
	w.WriteString(chain)
	w.WriteByte('\n')
	return 1
}

func (r *renderer) port(w sink, port uint16) {
	r.tmp = strconv.AppendUint(r.tmp[:0], uint64(port), 10)
	w.Write(r.tmp)
}

// portChain writes the chain of one Service port into w and returns its rule count; 0 (and
// nothing written) when the port has no usable endpoint or protocol, or nothing would jump
// to the chain.
//
// DNAT rules sit directly in this chain, one per endpoint, instead of kube-proxy's chain per
// endpoint: it halves the rules and chains to write. Session affinity needs no endpoint chain
// either: the recent lists a rule matches and sets do that job (see dnatRules).
func (r *renderer) portChain(w sink, s *Service, p Port, chain string) int {
	pr := iptProto(p.Protocol)
	if pr == "" || !reachable(r.family, s) {
		return 0
	}
	r.targets = appendPortTargets(r.targets[:0], r.family, s, p)
	eps := r.targets
	if len(eps) == 0 {
		return 0
	}
	n := 0
	if s.Local {
		// Source IP is kept, except when an endpoint reaches its own Service through the VIP
		// (hairpin): without masquerade its reply would bypass the DNAT and be dropped.
		for _, ep := range eps {
			w.WriteString("-A ")
			w.WriteString(chain)
			w.WriteString(" -s ")
			r.host(w, ep.addr)
			w.WriteString(" -j " + chainMasq + "\n")
			n++
		}
	} else {
		w.WriteString("-A ")
		w.WriteString(chain)
		w.WriteString(" -j " + chainMasq + "\n")
		n++
	}
	return n + r.dnatRules(w, s, chain, pr, eps)
}

// dnatRules writes the DNAT rules of a Service port chain: one per endpoint, each taken with
// the probability that spreads new connections evenly.
//
// With session affinity, first one rule per endpoint sends a client that endpoint's recent
// list saw within the affinity time back to it, and renews the entry; then whichever random
// rule matches records the client in its endpoint's list (matches stop at the first that
// fails, so only the chosen endpoint's list is set). The kernel deletes a list with the last
// rule naming it: the lists of an endpoint that went away, or of a port whose affinity was
// switched off, go with their rules.
func (r *renderer) dnatRules(w sink, s *Service, chain, pr string, eps []target) int {
	var names []string
	var secs string
	if s.Affinity > 0 {
		secs = strconv.FormatInt(int64(max(s.Affinity/time.Second, 1)), 10)
		for _, ep := range eps {
			names = append(names, recentListName(chain, ep))
		}
	}
	for i, ep := range names {
		w.WriteString("-A " + chain + " -p " + pr + " -m recent --name " + ep + " --rcheck --seconds " + secs +
			" --reap -m recent --name " + ep + " --set")
		r.dnatTo(w, eps[i])
	}
	for i, ep := range eps {
		w.WriteString("-A ")
		w.WriteString(chain)
		w.WriteString(" -p ")
		w.WriteString(pr)
		if left := len(eps) - i; left > 1 {
			// 1/left at each step gives every endpoint the same overall chance.
			w.WriteString(" -m statistic --mode random --probability ")
			w.WriteString(probability(left))
		}
		if names != nil {
			w.WriteString(" -m recent --name " + names[i] + " --set")
		}
		r.dnatTo(w, ep)
	}
	return len(names) + len(eps)
}

// dnatTo ends a rule with its DNAT target.
func (r *renderer) dnatTo(w sink, ep target) {
	w.WriteString(" -j DNAT --to-destination ")
	r.tmp = netip.AddrPortFrom(ep.addr, ep.port).AppendTo(r.tmp[:0])
	w.Write(r.tmp)
	w.WriteByte('\n')
}

// recentListName names the recent list (xt_recent) of one endpoint of a Service port chain:
// hashed like the chain, so it is short, stable across restarts and unique to the chain and
// endpoint. (The kernel allows up to 199 characters; kube-proxy names its lists after its
// 28-character endpoint chains, and so does this, with the stem VIPA-SEP-.)
func recentListName(chain string, ep target) string {
	h := sha256.Sum256([]byte(chain + "/" + netip.AddrPortFrom(ep.addr, ep.port).String()))
	var enc [56]byte
	base32.StdEncoding.Encode(enc[:], h[:])
	return recentStem + string(enc[:16])
}
