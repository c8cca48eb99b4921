#!/usr/bin/env python3
# Writes the CEL rules of IPGroup spec.addresses into api/v1/ipgroup_types.go
# (the spec-level rules above IPGroupSpec, the items rules above Addresses).
# CEL has no ordering of IPs, no functions and no variables in the API
# server's environment, and a cost budget: the rules are long expressions
# built here from small pieces. Run `python3 hack/ipgroup-cel.py && make
# manifests`, then check that the API server still installs the CRD (any
# envtest suite does).
#
# How addresses are compared: an IPv4 address as an int (octets from split);
# an IPv6 one by its last group padded to four hex digits, which is enough
# because a range lies within one /112 (checked first). A CIDR overlaps a
# range when it holds an end of it or its own address lies inside it.
# Splitting with split() or concatenating string(int) leaves the estimated
# size unbounded, so the rules use substring()/indexOf() and literals only,
# and `!(a == b)` instead of `a != b` on CIDRs for the same reason.
def S(x): return f"{x}.substring(0, {x}.indexOf('-')).trim()"
def E(x): return f"{x}.substring({x}.indexOf('-') + 1).trim()"
def isrange(x): return f"({x}.contains('-') && isIP({S(x)}) && isIP({E(x)}))"
def valid(x): return f"(isCIDR({x}) || {isrange(x)})"
def net(c): return f"{c}.substring(0, {c}.indexOf('/'))"  # a CIDR's address as written
def int4(x): return "(" + " + ".join(f"int({x}.split('.')[{i}]){m}" for i, m in enumerate([" * 16777216", " * 65536", " * 256", ""])) + ")"
def grp(x):  # last IPv6 group, four lowercase hex digits
    g = f"{x}.lowerAscii().substring({x}.lastIndexOf(':') + 1)"
    return f"({g}.size() == 0 ? '0000' : ('000' + {g}).substring({g}.size() - 1))"
def le(a, b):  # a <= b for IPs of one family, IPv6 ones inside one /112
    return f"({a}.contains(':') ? {grp(a)} <= {grp(b)} : {int4(a)} <= {int4(b)})"
def fam(a): return f"ip({a}).family()"
def block(a): return f"cidr({a} + ({a}.contains(':') ? '/112' : '/8'))"
def cr(c, r):  # CIDR c overlaps range r: c holds an end, or c lies inside r
    return (f"({fam(S(r))} == cidr({c}).ip().family() && (cidr({c}).containsIP({S(r)}) || cidr({c}).containsIP({E(r)}) || "
            f"({block(S(r))}.containsIP({net(c)}) && {le(S(r), net(c))} && {le(net(c), E(r))})))")
def rr(a, b):
    return f"({fam(S(a))} == {fam(S(b))} && {block(S(a))}.containsIP({S(b)}) && {le(S(a), E(b))} && {le(S(b), E(a))})"
def overlap(a, b):
    cc = f"(cidr({a}).containsCIDR({b}) || cidr({b}).containsCIDR({a}))"
    return f"(isCIDR({a}) ? (isCIDR({b}) ? {cc} : {cr(a, b)}) : (isCIDR({b}) ? {cr(b, a)} : {rr(a, b)}))"

out = []
def rule(r, msg=None, mexpr=None, prefix="// +kubebuilder:validation:XValidation"):
    m = f',message="{msg}"' if msg else f',messageExpression="{mexpr}"'
    assert '"' not in r, r
    out.append(f'{prefix}:rule="{r}"{m}')

out.append("SPEC")
rule("has(self.segment) || (has(self.addresses) && self.addresses.size() > 0)", "an IPGroup needs a segment or addresses (or both)")
rule(f"!has(self.addresses) || self.addresses.all(i, a, self.addresses.all(j, b, i >= j || !{valid('a')} || !{valid('b')} || !{overlap('a', 'b')}))",
     msg="addresses entries must not overlap each other: list every address once")
rule(f"!has(self.addresses) || !has(self.segment) || !isCIDR(self.segment) || self.addresses.all(a, !{valid('a')} || !{overlap('self.segment', 'a')})",
     msg="addresses entries must not overlap the segment: list every address once")
# excludedIPs: the exact test against 1024 entries times 16 ranges is beyond CEL's budget, so an entry must
# touch the segment or a CIDR entry exactly, or lie in the /8 (IPv4) or /112 (IPv6) block of a range entry.
ecidr = "(e.contains('/') ? e : e + (e.contains(':') ? '/128' : '/32'))"
near = f"(isCIDR(a) ? (isIP(e) ? cidr(a).containsIP(e) : (cidr(a).containsCIDR(e) || cidr(e).containsCIDR(a))) : (a.contains('-') && (isIP(e) ? {block(S('a'))}.containsIP(e) : {block(S('a'))}.containsCIDR(e))))"
rule(f"!has(self.excludedIPs) || (has(self.segment) && !isCIDR(self.segment)) || self.excludedIPs.all(e, !(isIP(e) || isCIDR(e)) || (has(self.segment) && (isIP(e) ? cidr(self.segment).containsIP(e) : (cidr(self.segment).containsCIDR(e) || cidr(e).containsCIDR(self.segment)))) || (has(self.addresses) && self.addresses.exists(a, {near})))",
     msg="every excludedIPs entry must be inside the segment or one of the addresses (an IP, or a CIDR that overlaps one)")
out.append("ITEMS")
P = "// +kubebuilder:validation:items:XValidation"
irule = lambda r, msg=None, mexpr=None: rule(r, msg, mexpr, P)
irule(valid('self'), msg="each addresses entry is a CIDR such as 192.0.2.0/28 or 2001:db8::/120, or a range start-end such as 192.0.2.20-192.0.2.30")
irule("!(self.contains(':') && self.contains('.'))", mexpr="'addresses entry ' + self + ' is IPv4-mapped (or -compatible) IPv6, which IPv6 never routes to a host; write the IPv4 addresses themselves, such as 192.0.2.0/28'")
C = "!isCIDR(self) || "
irule(C + "cidr(self) == cidr(self).masked()", mexpr="'addresses entry ' + self + ' must be written as its network address (host bits zero), e.g. 192.0.2.0/28'")
irule(C + "(cidr(self).ip().family() == 4 ? cidr(self).prefixLength() >= 8 : cidr(self).prefixLength() >= 16)", mexpr="'addresses entry ' + self + ' is too wide to be a VIP pool: the shortest prefix is /8 for IPv4 and /16 for IPv6; split it'")
W = f"!{isrange('self')} || "
same = f"{fam(S('self'))} == {fam(E('self'))}"
irule(W + same, mexpr="'addresses entry ' + self + ' mixes IPv4 and IPv6: a range is of one family'")
irule(f"{W}!({same}) || {block(S('self'))}.masked() == {block(E('self'))}.masked()", mexpr="'addresses entry ' + self + ' is too wide for a range: an IPv4 range lies within one /8, an IPv6 range within one /112 (65536 addresses); split it, or write a CIDR'")
irule(f"{W}!({same}) || !({block(S('self'))}.masked() == {block(E('self'))}.masked()) || {le(S('self'), E('self'))}", mexpr="'addresses entry ' + self + ' ends before it starts: write the lower address first'")
def both(cidr_cond, range_cond, what, example="192.0.2.0/28"):
    r = f"isCIDR(self) ? !({cidr_cond}) : (!{isrange('self')} || !({range_cond}))"
    irule(r, mexpr=f"'addresses entry ' + self + ' holds {what}; use routable addresses such as {example}'")
both("cidr(self).containsIP('0.0.0.0') || cidr(self).containsIP('::') || cidr('0.0.0.0/8').containsCIDR(self)",
     f"cidr('0.0.0.0/8').containsIP({S('self')}) || cidr('::/128').containsIP({S('self')})",
     "the unspecified address (0.0.0.0/8 or ::), which no host can be reached at")
both("cidr('127.0.0.0/8').containsCIDR(self) || cidr(self).containsIP('::1')",
     f"cidr('127.0.0.0/8').containsIP({S('self')}) || cidr('::/127').containsIP({S('self')})",
     "loopback addresses (127.0.0.0/8 or ::1), which every node answers itself")
both("cidr('224.0.0.0/4').containsCIDR(self) || cidr(self).containsCIDR('224.0.0.0/4') || cidr('ff00::/8').containsCIDR(self)",
     f"cidr('224.0.0.0/4').containsIP({S('self')}) || cidr('ff00::/8').containsIP({S('self')})",
     "multicast addresses (224.0.0.0/4 or ff00::/8), which are never a unicast VIP")
both("cidr('169.254.0.0/16').containsCIDR(self) || cidr(self).containsCIDR('169.254.0.0/16') || cidr('fe80::/10').containsCIDR(self)",
     f"cidr('fe80::/10').containsIP({S('self')}) || (cidr('169.0.0.0/8').containsIP({S('self')}) && {int4(S('self'))} <= 2852061183 && 2851995648 <= {int4(E('self'))})",
     "link-local addresses (169.254.0.0/16, with the cloud metadata address, or fe80::/10), which routers never forward")
both("cidr(self).containsIP('255.255.255.255')",
     f"cidr('255.255.255.255/32').containsIP({E('self')})",
     "the limited broadcast address 255.255.255.255, which every host on the link receives")


# Splice into the Go file.
import os
path = os.path.join(os.path.dirname(__file__), "..", "api", "v1", "ipgroup_types.go")
si, ii = out.index("SPEC"), out.index("ITEMS")
spec = out[si + 1:ii]
items = ["\t" + l for l in out[ii + 1:]]
lines = open(path).read().split("\n")
ts = lines.index("type IPGroupSpec struct {")
j = ts - 1
while lines[j].startswith("// +kubebuilder:validation:XValidation"):
    j -= 1
lines = lines[:j + 1] + spec + lines[ts:]
ai = lines.index('\tAddresses []string `json:"addresses,omitempty"`')
k = ai - 1
while lines[k].startswith("\t// +kubebuilder:validation:items:XValidation"):
    k -= 1
lines = lines[:k + 1] + items + lines[ai:]
open(path, "w").write("\n".join(lines))
