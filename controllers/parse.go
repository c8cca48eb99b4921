package controllers

import (
	"fmt"
	"net/netip"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
)

// The Service interface: the class we serve and the annotations we read.
const (
	LoadBalancerClass = lbclass.Name
	IPsAnnotation     = "vip.paas.org/ips"
	IPGroupAnnotation = "vip.paas.org/ipgroup"
)

// parseIPGroup turns an IPGroup into the allocator's plain type. The API server
// already validated it (CEL); errors here mean a schema older than this code.
func parseIPGroup(g *paasv1.IPGroup) (*allocator.Group, error) {
	segment, err := netip.ParsePrefix(g.Spec.Segment)
	if err != nil {
		return nil, fmt.Errorf("segment %q is not a CIDR: %w", g.Spec.Segment, err)
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
		Name:       g.Name,
		Segment:    segment,
		Excluded:   excluded,
		AutoAssign: g.Spec.AutoAssign == nil || *g.Spec.AutoAssign,
		Priority:   g.Spec.Priority,
		Admits: func(nsLabels, svcLabels map[string]string) bool {
			return nsSel.Matches(labels.Set(nsLabels)) && svcSel.Matches(labels.Set(svcLabels))
		},
	})
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

// requestFor reads what svc asks for: families, requested IPs, named groups.
func requestFor(svc *corev1.Service, nsLabels map[string]string) (allocator.Request, error) {
	req := allocator.Request{NamespaceLabels: nsLabels, ServiceLabels: svc.Labels}
	for _, f := range svc.Spec.IPFamilies {
		req.Families = append(req.Families, allocator.Family(f))
	}
	if len(req.Families) == 0 {
		req.Families = []allocator.Family{allocator.IPv4}
	}

	annotated := splitList(svc.Annotations[IPsAnnotation])
	for _, s := range annotated {
		addr, err := netip.ParseAddr(s)
		if err != nil {
			return req, fmt.Errorf("annotation %s: %q is not an IP address; write addresses separated by commas, one per family", IPsAnnotation, s)
		}
		if _, dup := requestedOf(req.IPs, allocator.FamilyOf(addr)); dup {
			return req, fmt.Errorf("annotation %s asks for two %s addresses; a Service gets one address per family", IPsAnnotation, allocator.FamilyOf(addr))
		}
		req.IPs = append(req.IPs, addr.Unmap())
	}
	if s := svc.Spec.LoadBalancerIP; s != "" {
		addr, err := netip.ParseAddr(s)
		if err != nil {
			return req, fmt.Errorf("spec.loadBalancerIP %q is not an IP address", s)
		}
		if len(annotated) > 0 {
			if have, ok := requestedOf(req.IPs, allocator.FamilyOf(addr)); !ok || have != addr {
				return req, fmt.Errorf("spec.loadBalancerIP %s and annotation %s=%q disagree; set only one of them", s, IPsAnnotation, svc.Annotations[IPsAnnotation])
			}
		} else {
			req.IPs = append(req.IPs, addr.Unmap())
		}
	}
	req.Groups = splitList(svc.Annotations[IPGroupAnnotation])
	return req, nil
}

func requestedOf(ips []netip.Addr, fam allocator.Family) (netip.Addr, bool) {
	for _, a := range ips {
		if allocator.FamilyOf(a) == fam {
			return a, true
		}
	}
	return netip.Addr{}, false
}

func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}
