package bgp

import (
	"net/netip"
	"strings"
	"testing"
)

// An unnumbered session goes to a router the admin named, or to the one
// router of a point-to-point link: never to whatever host on a shared link
// sends a Router Advertisement.
func TestPickRouter(t *testing.T) {
	r1, r2 := netip.MustParseAddr("fe80::1"), netip.MustParseAddr("fe80::2")
	host := netip.MustParseAddr("fe80::99")
	for _, tc := range []struct {
		name  string
		link  linkFacts
		named netip.Addr
		want  string // the router, zoned; "" for none
		which string // in which, or in the error
	}{
		{"the one router of a point-to-point interface", linkFacts{Name: "eth1", PointToPoint: true, Routers: []netip.Addr{r1}}, netip.Addr{}, "fe80::1%eth1", "point-to-point interface"},
		{"the only neighbour on the link", linkFacts{Name: "eth1", Routers: []netip.Addr{r1}}, netip.Addr{}, "fe80::1%eth1", "the only neighbour"},
		{"a shared link: refused", linkFacts{Name: "eth1", Routers: []netip.Addr{host}, Others: []netip.Addr{r1}}, netip.Addr{}, "", "shared link goes only to the router named"},
		{"a shared link, the router named", linkFacts{Name: "eth1", Routers: []netip.Addr{host}, Others: []netip.Addr{r1}}, r1, "fe80::1%eth1", "names (interfaceRouter)"},
		{"two routers: refused", linkFacts{Name: "eth1", Routers: []netip.Addr{r1, r2}}, netip.Addr{}, "", "2 routers on eth1"},
		{"two routers, one named", linkFacts{Name: "eth1", Routers: []netip.Addr{r1, r2}}, r2, "fe80::2%eth1", "names (interfaceRouter)"},
		{"no router yet", linkFacts{Name: "eth1"}, netip.Addr{}, "", "no router on eth1 yet"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got, which, err := pickRouter(tc.link, tc.named)
			if tc.want == "" {
				if err == nil || !strings.Contains(err.Error(), tc.which) {
					t.Fatalf("pickRouter = %v, %v; want an error saying %q", got, err, tc.which)
				}
				return
			}
			if err != nil || got.String() != tc.want || !strings.Contains(which, tc.which) {
				t.Fatalf("pickRouter = %v (%q), %v; want %s (%q)", got, which, err, tc.want, tc.which)
			}
		})
	}
}
