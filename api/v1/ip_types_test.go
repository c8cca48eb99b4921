package v1

import (
	"net/netip"
	"testing"

	"k8s.io/apimachinery/pkg/api/validate/content"
	"k8s.io/apimachinery/pkg/util/validation"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestIPObjectNameIsAValidNameAndReadsBack(t *testing.T) {
	for _, c := range []struct{ addr, name string }{
		{"192.0.2.10", "192.0.2.10"},
		{"2001:db8::5", "2001-db8--5"}, // the original operator's spelling
		{"2001:db8:0:1:2:3:4:5", "2001-db8-0-1-2-3-4-5"},
		{"2001:db8::", "2001-db8--0"}, // "2001-db8--" would end in '-'
		{"2001:db8:1::", "2001-db8-1--0"},
		{"::1", "0--1"}, // "--1" would start with '-'
		{"::", "0--0"},
		{"::ffff:192.0.2.10", "192.0.2.10"}, // IPv4-mapped is the IPv4 address
	} {
		addr := netip.MustParseAddr(c.addr)
		name := IPObjectName(addr)
		if name != c.name {
			t.Errorf("IPObjectName(%s) = %q, want %q", c.addr, name, c.name)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			t.Errorf("%s: %q is no valid object name: %v", c.addr, name, errs)
		}
		if errs := content.IsPathSegmentName(name); len(errs) > 0 {
			t.Errorf("%s: %q is no valid path segment: %v", c.addr, name, errs)
		}
		ip := IP{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if got, ok := ip.Addr(); !ok || got != addr.Unmap() {
			t.Errorf("Addr() of %q = %v, %v; want %s", name, got, ok, addr.Unmap())
		}
	}
}
