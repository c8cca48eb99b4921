// Package k8salloc is the one adapter between Kubernetes objects and the pure
// allocator: it reads an IPGroup into an allocator.Group, a Service into an
// allocator.Request, and a Service's status into the addresses it holds. The
// operator's controllers and the migration both read objects through it, so
// they judge a Service alike (MetalLB's k8salloc is the model).
package k8salloc

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/ingress"
)

// Group turns an IPGroup into the allocator's plain type. The API server
// already validated it (CEL); errors here mean a schema older than this code.
func Group(g *paasv1.IPGroup) (*allocator.Group, error) {
	var segment netip.Prefix
	if g.Spec.Segment != "" {
		var err error
		if segment, err = netip.ParsePrefix(g.Spec.Segment); err != nil {
			return nil, fmt.Errorf("segment %q is not a CIDR: %w", g.Spec.Segment, err)
		}
	}
	var ranges []allocator.Range
	for _, a := range g.Spec.Addresses {
		r, err := ParseAddresses(a)
		if err != nil {
			return nil, fmt.Errorf("addresses: %w", err)
		}
		ranges = append(ranges, r)
	}
	var excluded []netip.Prefix
	for _, e := range g.Spec.ExcludedIPs {
		p, err := parseIPOrCIDR(e)
		if err != nil {
			return nil, fmt.Errorf("excludedIPs: %w", err)
		}
		excluded = append(excluded, p)
	}
	nsSel, err := selector(g.Spec.NamespaceSelector)
	if err != nil {
		return nil, fmt.Errorf("namespaceSelector: %w", err)
	}
	svcSel, err := selector(g.Spec.ServiceSelector)
	if err != nil {
		return nil, fmt.Errorf("serviceSelector: %w", err)
	}
	return allocator.NewGroup(allocator.Group{
		Name:              g.Name,
		Segment:           segment,
		Ranges:            ranges,
		Excluded:          excluded,
		AvoidBuggyIPs:     g.Spec.AvoidBuggyIPs,
		AutoAssign:        g.Spec.AutoAssign == nil || *g.Spec.AutoAssign,
		Priority:          g.Spec.Priority,
		ClusterPolicyOnly: election.ModeOf(g) == paasv1.AnnounceBGP && g.Spec.Announce.BGP.Aggregates(),
		L2:                election.ModeOf(g) == paasv1.AnnounceL2,
		Admits: func(nsLabels, svcLabels map[string]string) bool {
			return nsSel.Matches(labels.Set(nsLabels)) && svcSel.Matches(labels.Set(svcLabels))
		},
	})
}

// ParseAddresses reads one entry of spec.addresses, as MetalLB's
// IPAddressPool writes it: a CIDR (192.0.2.0/28) or an inclusive range
// (192.0.2.20-192.0.2.30, spaces around the dash allowed).
func ParseAddresses(s string) (allocator.Range, error) {
	if strings.Contains(s, "/") {
		p, err := netip.ParsePrefix(strings.TrimSpace(s))
		if err != nil {
			return allocator.Range{}, fmt.Errorf("%q is not a CIDR: %w", clip(s), err)
		}
		return allocator.RangeOf(p), nil
	}
	first, last, ok := strings.Cut(s, "-")
	if !ok {
		return allocator.Range{}, fmt.Errorf("%q is neither a CIDR nor a range start-end", clip(s))
	}
	f, err1 := netip.ParseAddr(strings.TrimSpace(first))
	l, err2 := netip.ParseAddr(strings.TrimSpace(last))
	if err1 != nil || err2 != nil {
		return allocator.Range{}, fmt.Errorf("%q is not a range of two IP addresses", clip(s))
	}
	return allocator.Range{First: f, Last: l}, nil
}

// selector converts a label selector; absent selects everything.
func selector(s *metav1.LabelSelector) (labels.Selector, error) {
	if s == nil {
		return labels.Everything(), nil
	}
	return metav1.LabelSelectorAsSelector(s)
}

func parseIPOrCIDR(s string) (netip.Prefix, error) {
	if strings.Contains(s, "/") {
		return netip.ParsePrefix(s)
	}
	addr, err := netip.ParseAddr(s)
	if err != nil {
		return netip.Prefix{}, err
	}
	return netip.PrefixFrom(addr, addr.BitLen()), nil
}

// Request reads what svc asks for: families, requested IPs, named groups.
func Request(svc *corev1.Service, nsLabels map[string]string) (allocator.Request, error) {
	req := allocator.Request{NamespaceLabels: nsLabels, ServiceLabels: svc.Labels,
		LocalPolicy: svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal}
	for _, f := range svc.Spec.IPFamilies {
		req.Families = append(req.Families, allocator.Family(f))
	}
	if len(req.Families) == 0 {
		req.Families = []allocator.Family{allocator.IPv4}
	}

	ipsKey, ipsValue, err := annotation(svc, paasv1.IPsAnnotation, paasv1.IPsAnnotationAliases...)
	if err != nil {
		return req, err
	}
	annotated := SplitList(ipsValue)
	if len(annotated) > 2 {
		return req, fmt.Errorf("annotation %s lists %d addresses; a Service gets one address per family, so two at most", ipsKey, len(annotated))
	}
	for _, s := range annotated {
		addr, err := ParseRequestedIP(s)
		if err != nil {
			return req, fmt.Errorf("annotation %s: %w; write addresses separated by commas, one per family", ipsKey, err)
		}
		if have, dup := requestedOf(req.IPs, allocator.FamilyOf(addr)); dup {
			if have == addr {
				return req, fmt.Errorf("annotation %s names %s twice; write it once", ipsKey, addr)
			}
			return req, fmt.Errorf("annotation %s asks for two %s addresses; a Service gets one address per family", ipsKey, allocator.FamilyOf(addr))
		}
		req.IPs = append(req.IPs, addr)
	}
	if s := svc.Spec.LoadBalancerIP; s != "" {
		addr, err := ParseRequestedIP(s)
		if err != nil {
			return req, fmt.Errorf("spec.loadBalancerIP %w", err)
		}
		if len(annotated) > 0 {
			if have, ok := requestedOf(req.IPs, allocator.FamilyOf(addr)); !ok || have != addr {
				return req, fmt.Errorf("spec.loadBalancerIP %s and annotation %s=%q disagree; set only one of them", addr, ipsKey, clip(ipsValue))
			}
		} else {
			req.IPs = append(req.IPs, addr)
		}
	}
	if _, _, err := annotation(svc, paasv1.IPGroupAnnotation, paasv1.IPGroupAnnotationAliases...); err != nil {
		return req, err
	}
	req.Groups = NamedGroups(svc)
	sharing, err := SharingOf(svc)
	if err != nil {
		return req, err
	}
	req.Sharing = sharing
	return req, nil
}

// ParseRequestedIP reads one address a Service asks for (an entry of the
// vip.paas.org/ips annotation, or spec.loadBalancerIP) as Kubernetes validates
// new IP fields: no leading zeros (192.0.2.010 is octal to some tools, decimal
// to others), no zone (fe80::1%eth0 names an interface, no VIP has one), no
// IPv4-mapped IPv6 (::ffff:192.0.2.11 is an IPv4 address spelled as IPv6:
// which family would it get?). Each refusal says what to write instead; what
// the user wrote is quoted clipped, so a huge value cannot swell the condition.
func ParseRequestedIP(s string) (netip.Addr, error) {
	addr, err := netip.ParseAddr(s)
	switch {
	case err != nil && leadingZeros(s):
		return netip.Addr{}, fmt.Errorf("%q is not an IP address: leading zeros are ambiguous (octal or decimal?); write it without them", clip(s))
	case err != nil:
		return netip.Addr{}, fmt.Errorf("%q is not an IP address", clip(s))
	case addr.Zone() != "":
		return netip.Addr{}, fmt.Errorf("%q has a zone (%%%s): a VIP is a global address on no particular interface; write it without the zone", clip(s), clip(addr.Zone()))
	case addr.Is4In6():
		return netip.Addr{}, fmt.Errorf("%q is an IPv4 address written as IPv4-mapped IPv6; write it as %s", clip(s), addr.Unmap())
	}
	return addr, nil
}

// leadingZeros reports whether s looks like an IPv4 address with a
// zero-padded part (192.0.2.010), which netip refuses.
func leadingZeros(s string) bool {
	parts := strings.Split(s, ".")
	if len(parts) != 4 {
		return false
	}
	for _, p := range parts {
		if len(p) > 1 && p[0] == '0' {
			return true
		}
	}
	return false
}

// clip shortens what a user wrote to what a message can carry.
func clip(s string) string {
	const most = 64
	if len(s) <= most {
		return s
	}
	return s[:most] + "..."
}

func requestedOf(ips []netip.Addr, fam allocator.Family) (netip.Addr, bool) {
	for _, a := range ips {
		if allocator.FamilyOf(a) == fam {
			return a, true
		}
	}
	return netip.Addr{}, false
}

// SplitList splits a comma-separated annotation value, dropping blanks.
func SplitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

// IngressAddrs are the addresses in a Service's status as the allocator sees them
// (ingress.Shown: zoned and repeated entries included, which the agent's
// ingress.Addrs leaves out).
func IngressAddrs(svc *corev1.Service) []netip.Addr {
	return ingress.Shown(svc)
}

// NamedGroups are the IPGroups svc names in its vip.paas.org/ipgroup annotation, or in
// MetalLB's address-pool annotation (the IPGroup converted from a pool keeps its name).
func NamedGroups(svc *corev1.Service) []string {
	_, v, _ := annotation(svc, paasv1.IPGroupAnnotation, paasv1.IPGroupAnnotationAliases...)
	return SplitList(v)
}

// annotation returns the first of key and aliases that svc carries, and its value. Two that
// are carried with different values are refused: which one did the user mean?
func annotation(svc *corev1.Service, key string, aliases ...string) (string, string, error) {
	found, value := "", ""
	for _, k := range append([]string{key}, aliases...) {
		v, ok := svc.Annotations[k]
		if !ok {
			continue
		}
		if found == "" {
			found, value = k, v
			continue
		}
		if strings.Join(SplitList(v), ",") != strings.Join(SplitList(value), ",") {
			return found, value, fmt.Errorf("annotations %s=%q and %s=%q disagree; keep one of them", found, clip(value), k, clip(v))
		}
	}
	return found, value, nil
}

// AnnotatedIPs are the addresses svc asks for in its vip.paas.org/ips annotation (or
// MetalLB's loadBalancerIPs), skipping what is no address (Request reports those).
func AnnotatedIPs(svc *corev1.Service) []netip.Addr {
	var out []netip.Addr
	_, v, _ := annotation(svc, paasv1.IPsAnnotation, paasv1.IPsAnnotationAliases...)
	for _, s := range SplitList(v) {
		if a, err := netip.ParseAddr(s); err == nil {
			out = append(out, a.Unmap())
		}
	}
	return out
}
