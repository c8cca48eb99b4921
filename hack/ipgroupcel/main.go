// Command ipgroupcel writes the CEL rules of IPGroup spec.addresses into
// api/v1/ipgroup_types.go (the spec-level rules above IPGroupSpec, the items
// rules above Addresses). CEL has no ordering of IPs, no functions and no
// variables in the API server's environment, and a cost budget: the rules are
// long expressions built here from small pieces. Run `make generate manifests`
// (or `go run ./hack/ipgroupcel` from the repository root, then make
// manifests), then check that the API server still installs the CRD (any
// envtest suite does); make verify fails while the markers are stale.
//
// How addresses are compared: an IPv4 address as an int (octets from split);
// an IPv6 one by its last group padded to four hex digits, which is enough
// because a range lies within one /112 (checked first). A CIDR overlaps a
// range when it holds an end of it or its own address lies inside it.
// Splitting with split() or concatenating string(int) leaves the estimated
// size unbounded, so the rules use substring()/indexOf() and literals only,
// and `!(a == b)` instead of `a != b` on CIDRs for the same reason.
//
// Every function below takes CEL expressions (a variable such as "a" or
// "self.segment") and returns a CEL expression as text.
package main

import (
	"fmt"
	"log"
	"os"
	"strings"
)

// typesFile is where the markers go, relative to the repository root.
const typesFile = "api/v1/ipgroup_types.go"

// rangeStart is the first address of a range "start-end".
func rangeStart(x string) string {
	return fmt.Sprintf("%[1]s.substring(0, %[1]s.indexOf('-')).trim()", x)
}

// rangeEnd is the last address of a range "start-end".
func rangeEnd(x string) string {
	return fmt.Sprintf("%[1]s.substring(%[1]s.indexOf('-') + 1).trim()", x)
}

// isRange says x is written start-end with an IP at each end.
func isRange(x string) string {
	return fmt.Sprintf("(%s.contains('-') && isIP(%s) && isIP(%s))", x, rangeStart(x), rangeEnd(x))
}

// valid says x is an addresses entry the other rules can read: a CIDR or a range.
func valid(x string) string {
	return fmt.Sprintf("(isCIDR(%s) || %s)", x, isRange(x))
}

// cidrAddress is a CIDR's address as written, without the prefix length.
func cidrAddress(c string) string {
	return fmt.Sprintf("%[1]s.substring(0, %[1]s.indexOf('/'))", c)
}

// int4 is an IPv4 address as one int, from its four octets.
func int4(x string) string {
	weights := []string{" * 16777216", " * 65536", " * 256", ""}
	terms := make([]string, len(weights))
	for i, weight := range weights {
		terms[i] = fmt.Sprintf("int(%s.split('.')[%d])%s", x, i, weight)
	}
	return "(" + strings.Join(terms, " + ") + ")"
}

// lastIPv6Group is the last group of an IPv6 address as four lowercase hex
// digits, so that groups compare as strings: empty (an address ending in ::)
// is '0000', and otherwise '000' in front keeps the last four characters.
func lastIPv6Group(x string) string {
	group := fmt.Sprintf("%[1]s.lowerAscii().substring(%[1]s.lastIndexOf(':') + 1)", x)
	return fmt.Sprintf("(%[1]s.size() == 0 ? '0000' : ('000' + %[1]s).substring(%[1]s.size() - 1))", group)
}

// le says a <= b for IPs of one family, IPv6 ones inside one /112.
func le(a, b string) string {
	return fmt.Sprintf("(%s.contains(':') ? %s <= %s : %s <= %s)",
		a, lastIPv6Group(a), lastIPv6Group(b), int4(a), int4(b))
}

// family is an IP's family, 4 or 6.
func family(ip string) string {
	return fmt.Sprintf("ip(%s).family()", ip)
}

// block is the widest CIDR a range may span from ip: its /8 (IPv4) or /112
// (IPv6), where int4 and lastIPv6Group order addresses.
func block(ip string) string {
	return fmt.Sprintf("cidr(%[1]s + (%[1]s.contains(':') ? '/112' : '/8'))", ip)
}

// cidrOverlapsRange says CIDR c overlaps range r: c holds an end of r, or c's
// own address lies inside r.
func cidrOverlapsRange(c, r string) string {
	start, end, address := rangeStart(r), rangeEnd(r), cidrAddress(c)
	return fmt.Sprintf("(%s == cidr(%s).ip().family() && (cidr(%s).containsIP(%s) || cidr(%s).containsIP(%s) || "+
		"(%s.containsIP(%s) && %s && %s)))",
		family(start), c, c, start, c, end,
		block(start), address, le(start, address), le(address, end))
}

// rangesOverlap says ranges a and b share an address: of one family and
// block, each starts no later than the other ends.
func rangesOverlap(a, b string) string {
	return fmt.Sprintf("(%s == %s && %s.containsIP(%s) && %s && %s)",
		family(rangeStart(a)), family(rangeStart(b)), block(rangeStart(a)), rangeStart(b),
		le(rangeStart(a), rangeEnd(b)), le(rangeStart(b), rangeEnd(a)))
}

// overlaps says entries a and b (each a CIDR or a range) share an address.
func overlaps(a, b string) string {
	cidrs := fmt.Sprintf("(cidr(%[1]s).containsCIDR(%[2]s) || cidr(%[2]s).containsCIDR(%[1]s))", a, b)
	return fmt.Sprintf("(isCIDR(%s) ? (isCIDR(%s) ? %s : %s) : (isCIDR(%s) ? %s : %s))",
		a, b, cidrs, cidrOverlapsRange(a, b), b, cidrOverlapsRange(b, a), rangesOverlap(a, b))
}

// markers collects XValidation marker lines of one kind.
type markers struct {
	prefix string
	lines  []string
}

// add appends a rule with a fixed message.
func (m *markers) add(rule, message string) {
	m.addLine(rule, fmt.Sprintf(`message="%s"`, message))
}

// addExpr appends a rule whose message is a CEL expression.
func (m *markers) addExpr(rule, messageExpression string) {
	m.addLine(rule, fmt.Sprintf(`messageExpression="%s"`, messageExpression))
}

func (m *markers) addLine(rule, message string) {
	// The marker quotes the rule with double quotes, so the rules use single ones.
	if strings.Contains(rule, `"`) {
		log.Fatalf("rule holds a double quote: %s", rule)
	}
	m.lines = append(m.lines, fmt.Sprintf(`%s:rule="%s",%s`, m.prefix, rule, message))
}

// specRules are the rules on IPGroupSpec: entries against each other, the
// segment and excludedIPs.
func specRules() []string {
	m := markers{prefix: "// +kubebuilder:validation:XValidation"}
	m.add("has(self.segment) || (has(self.addresses) && self.addresses.size() > 0)",
		"an IPGroup needs a segment or addresses (or both)")
	m.add(fmt.Sprintf("!has(self.addresses) || self.addresses.all(i, a, self.addresses.all(j, b, i >= j || !%s || !%s || !%s))",
		valid("a"), valid("b"), overlaps("a", "b")),
		"addresses entries must not overlap each other: list every address once")
	m.add(fmt.Sprintf("!has(self.addresses) || !has(self.segment) || !isCIDR(self.segment) || self.addresses.all(a, !%s || !%s)",
		valid("a"), overlaps("self.segment", "a")),
		"addresses entries must not overlap the segment: list every address once")
	// excludedIPs: the exact test against 1024 entries times 16 ranges is
	// beyond CEL's budget, so an entry must touch the segment or a CIDR entry
	// exactly, or lie in the /8 (IPv4) or /112 (IPv6) block of a range entry.
	rangeBlock := block(rangeStart("a"))
	nearEntry := fmt.Sprintf("(isCIDR(a) ? (isIP(e) ? cidr(a).containsIP(e) : (cidr(a).containsCIDR(e) || cidr(e).containsCIDR(a))) : "+
		"(a.contains('-') && (isIP(e) ? %s.containsIP(e) : %s.containsCIDR(e))))", rangeBlock, rangeBlock)
	m.add("!has(self.excludedIPs) || (has(self.segment) && !isCIDR(self.segment)) || self.excludedIPs.all(e, !(isIP(e) || isCIDR(e)) || "+
		"(has(self.segment) && (isIP(e) ? cidr(self.segment).containsIP(e) : (cidr(self.segment).containsCIDR(e) || cidr(e).containsCIDR(self.segment)))) || "+
		"(has(self.addresses) && self.addresses.exists(a, "+nearEntry+")))",
		"every excludedIPs entry must be inside the segment or one of the addresses (an IP, or a CIDR that overlaps one)")
	// A covering route must lie inside the pool: its length, per family, no
	// shorter than the prefix of any CIDR part of that family, the segment
	// or an addresses entry (a range is bounded where the route is built).
	bound := func(c string) string {
		return fmt.Sprintf("(cidr(%[1]s).ip().family() == 4 ? "+
			"(!has(self.announce.bgp.aggregationLength) || self.announce.bgp.aggregationLength >= cidr(%[1]s).prefixLength()) : "+
			"(!has(self.announce.bgp.aggregationLengthV6) || self.announce.bgp.aggregationLengthV6 >= cidr(%[1]s).prefixLength()))", c)
	}
	m.add("!has(self.announce) || !has(self.announce.bgp) || !has(self.segment) || !isCIDR(self.segment) || "+bound("self.segment"),
		"announce.bgp.aggregationLength (aggregationLengthV6 for IPv6) must not be shorter than the segment's prefix: a route wider than the group would draw traffic for addresses outside it")
	m.add("!has(self.announce) || !has(self.announce.bgp) || !has(self.addresses) || self.addresses.all(a, !isCIDR(a) || "+bound("a")+")",
		"announce.bgp.aggregationLength (aggregationLengthV6 for IPv6) must not be shorter than the prefix of any addresses entry of its family: a route wider than the group would draw traffic for addresses outside it")
	return m.lines
}

// itemRules are the rules on each addresses entry alone.
func itemRules() []string {
	m := markers{prefix: "// +kubebuilder:validation:items:XValidation"}
	m.add(valid("self"),
		"each addresses entry is a CIDR such as 192.0.2.0/28 or 2001:db8::/120, or a range start-end such as 192.0.2.20-192.0.2.30")
	m.addExpr("!(self.contains(':') && self.contains('.'))",
		"'addresses entry ' + self + ' is IPv4-mapped (or -compatible) IPv6, which IPv6 never routes to a host; write the IPv4 addresses themselves, such as 192.0.2.0/28'")

	const ifCIDR = "!isCIDR(self) || "
	m.addExpr(ifCIDR+"cidr(self) == cidr(self).masked()",
		"'addresses entry ' + self + ' must be written as its network address (host bits zero), e.g. 192.0.2.0/28'")
	m.addExpr(ifCIDR+"(cidr(self).ip().family() == 4 ? cidr(self).prefixLength() >= 8 : cidr(self).prefixLength() >= 16)",
		"'addresses entry ' + self + ' is too wide to be a VIP pool: the shortest prefix is /8 for IPv4 and /16 for IPv6; split it'")

	// Each range rule holds only where the ones before it hold, so that
	// each one's message names the one thing wrong.
	start, end := rangeStart("self"), rangeEnd("self")
	ifRange := "!" + isRange("self") + " || "
	oneFamily := family(start) + " == " + family(end)
	oneBlock := block(start) + ".masked() == " + block(end) + ".masked()"
	m.addExpr(ifRange+oneFamily,
		"'addresses entry ' + self + ' mixes IPv4 and IPv6: a range is of one family'")
	m.addExpr(ifRange+"!("+oneFamily+") || "+oneBlock,
		"'addresses entry ' + self + ' is too wide for a range: an IPv4 range lies within one /8, an IPv6 range within one /112 (65536 addresses); split it, or write a CIDR'")
	m.addExpr(ifRange+"!("+oneFamily+") || !("+oneBlock+") || "+le(start, end),
		"'addresses entry ' + self + ' ends before it starts: write the lower address first'")

	// refuse adds a rule refusing entries that hold addresses no VIP may
	// have: cidrHolds tests a CIDR entry, rangeHolds a range entry.
	refuse := func(cidrHolds, rangeHolds, what string) {
		rule := fmt.Sprintf("isCIDR(self) ? !(%s) : (!%s || !(%s))", cidrHolds, isRange("self"), rangeHolds)
		m.addExpr(rule, "'addresses entry ' + self + ' holds "+what+"; use routable addresses such as 192.0.2.0/28'")
	}
	refuse("cidr(self).containsIP('0.0.0.0') || cidr(self).containsIP('::') || cidr('0.0.0.0/8').containsCIDR(self)",
		fmt.Sprintf("cidr('0.0.0.0/8').containsIP(%[1]s) || cidr('::/128').containsIP(%[1]s)", start),
		"the unspecified address (0.0.0.0/8 or ::), which no host can be reached at")
	refuse("cidr('127.0.0.0/8').containsCIDR(self) || cidr(self).containsIP('::1')",
		fmt.Sprintf("cidr('127.0.0.0/8').containsIP(%[1]s) || cidr('::/127').containsIP(%[1]s)", start),
		"loopback addresses (127.0.0.0/8 or ::1), which every node answers itself")
	refuse("cidr('224.0.0.0/4').containsCIDR(self) || cidr(self).containsCIDR('224.0.0.0/4') || cidr('ff00::/8').containsCIDR(self)",
		fmt.Sprintf("cidr('224.0.0.0/4').containsIP(%[1]s) || cidr('ff00::/8').containsIP(%[1]s)", start),
		"multicast addresses (224.0.0.0/4 or ff00::/8), which are never a unicast VIP")
	// A range of one /8 overlaps 169.254.0.0/16 when it starts at or below
	// 169.254.255.255 (2852061183) and ends at or above 169.254.0.0 (2851995648).
	refuse("cidr('169.254.0.0/16').containsCIDR(self) || cidr(self).containsCIDR('169.254.0.0/16') || cidr('fe80::/10').containsCIDR(self)",
		fmt.Sprintf("cidr('fe80::/10').containsIP(%[1]s) || (cidr('169.0.0.0/8').containsIP(%[1]s) && %[2]s <= 2852061183 && 2851995648 <= %[3]s)",
			start, int4(start), int4(end)),
		"link-local addresses (169.254.0.0/16, with the cloud metadata address, or fe80::/10), which routers never forward")
	refuse("cidr(self).containsIP('255.255.255.255')",
		fmt.Sprintf("cidr('255.255.255.255/32').containsIP(%s)", end),
		"the limited broadcast address 255.255.255.255, which every host on the link receives")
	return m.lines
}

// replaceMarkersAbove replaces the lines starting with marker directly above
// the first line equal to anchor with replacement.
func replaceMarkersAbove(lines []string, anchor, marker string, replacement []string) ([]string, error) {
	at := -1
	for i, line := range lines {
		if line == anchor {
			at = i
			break
		}
	}
	if at < 0 {
		return nil, fmt.Errorf("no line %q", anchor)
	}
	first := at
	for first > 0 && strings.HasPrefix(lines[first-1], marker) {
		first--
	}
	spliced := append([]string{}, lines[:first]...)
	spliced = append(spliced, replacement...)
	return append(spliced, lines[at:]...), nil
}

func main() {
	source, err := os.ReadFile(typesFile)
	if err != nil {
		log.Fatalf("%v (run from the repository root)", err)
	}
	lines := strings.Split(string(source), "\n")

	lines, err = replaceMarkersAbove(lines, "type IPGroupSpec struct {",
		"// +kubebuilder:validation:XValidation", specRules())
	if err != nil {
		log.Fatalf("%s: spec rules: %v", typesFile, err)
	}

	var items []string
	for _, line := range itemRules() {
		items = append(items, "\t"+line)
	}
	lines, err = replaceMarkersAbove(lines, "\tAddresses []string `json:\"addresses,omitempty\"`",
		"\t// +kubebuilder:validation:items:XValidation", items)
	if err != nil {
		log.Fatalf("%s: items rules: %v", typesFile, err)
	}

	if err := os.WriteFile(typesFile, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		log.Fatal(err)
	}
}
