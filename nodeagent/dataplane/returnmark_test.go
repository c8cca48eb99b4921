package dataplane

import (
	"net/netip"
	"testing"
)

func TestRenderReturnMarks(t *testing.T) {
	marks := []ReturnMark{
		{Interface: "eth1", Mark: 0x1000000, Mask: 0xf000000, Destinations: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24"), netip.MustParsePrefix("2001:db8:b::/64")}},
		{Interface: "eth2", Mark: 0x2000000, Mask: 0xf000000, Destinations: []netip.Prefix{netip.MustParsePrefix("2001:db8:c::/64")}},
	}
	want := `*mangle
:VIPA-RETURN - [0:0]
-A VIPA-RETURN -d 192.0.2.0/24 -i eth1 -m addrtype ! --dst-type LOCAL -m conntrack --ctstate NEW -j CONNMARK --set-xmark 0x1000000/0xf000000
-A VIPA-RETURN -m connmark --mark 0x0/0xf000000 -j RETURN
-A VIPA-RETURN -m connmark --mark 0x1000000/0xf000000 -j MARK --set-xmark 0x1000000/0xf000000
-A VIPA-RETURN -m connmark --mark 0x2000000/0xf000000 -j MARK --set-xmark 0x2000000/0xf000000
COMMIT
`
	if got := renderReturnMarks(IPv4, marks); got != want {
		t.Fatalf("IPv4 (the IPv6 destinations left out):\n%s\nwant:\n%s", got, want)
	}
	if got := renderReturnMarks(IPv6, nil); got != "*mangle\n:VIPA-RETURN - [0:0]\nCOMMIT\n" {
		t.Fatalf("no marks: want an empty chain, got:\n%s", got)
	}
}
