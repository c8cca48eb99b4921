package service

import (
	"fmt"
	"testing"

	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

// The annotation names every claiming node up to maxClaimedBy, then counts
// the rest: every node of a subnet claims its network and broadcast address.
func TestClaimedBy(t *testing.T) {
	claims := func(n int) []allocator.Reservation {
		var out []allocator.Reservation
		for i := range n {
			out = append(out, allocator.Reservation{Node: fmt.Sprintf("n%02d", i)})
		}
		return out
	}
	for _, tc := range []struct {
		n    int
		want string
	}{
		{0, ""},
		{2, "n00,n01"},
		{maxClaimedBy + 3, "n00,n01,n02,n03,n04,n05,n06,n07,n08,n09,n10,n11,n12,n13,n14,n15,+3 more"},
	} {
		if got := claimedBy(claims(tc.n)); got != tc.want {
			t.Errorf("%d claims: %q, want %q", tc.n, got, tc.want)
		}
	}
}
