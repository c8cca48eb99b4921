package service

import (
	"fmt"
	"net/netip"
	"testing"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

func TestLeftToItsWriter(t *testing.T) {
	vip, other := netip.MustParseAddr("192.0.2.192"), netip.MustParseAddr("192.0.2.1")
	stranded := fmt.Errorf("no group: %w", allocator.ErrCannotRelocate)
	for _, tc := range []struct {
		desc    string
		result  allocation
		shown   []netip.Addr
		current []paasv1.IP
		want    bool
	}{
		{"another load balancer's address, no group allows it", allocation{held: []netip.Addr{vip}, err: stranded}, []netip.Addr{vip}, nil, true},
		{"a group allows it: adopted", allocation{held: []netip.Addr{vip}}, []netip.Addr{vip}, nil, false},
		{"a group gives another address: replaced", allocation{held: []netip.Addr{other}}, []netip.Addr{vip}, nil, false},
		{"ours already (a ledger object), its group gone", allocation{held: []netip.Addr{vip}, err: stranded}, nil, []paasv1.IP{{}}, false},
		{"held from before, not the status's", allocation{held: []netip.Addr{other}, err: stranded}, []netip.Addr{vip}, nil, false},
		{"nothing held", allocation{err: stranded}, []netip.Addr{vip}, nil, false},
		{"another error", allocation{held: []netip.Addr{vip}, err: fmt.Errorf("sync groups")}, []netip.Addr{vip}, nil, false},
	} {
		if got := leftToItsWriter(tc.result, tc.shown, tc.current); got != tc.want {
			t.Errorf("%s: leftToItsWriter = %v, want %v", tc.desc, got, tc.want)
		}
	}
}
