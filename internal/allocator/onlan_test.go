package allocator

import (
	"errors"
	"fmt"
	"maps"
	"net/netip"
	"slices"
	"strings"
	"testing"
)

// TestInUseOnLAN: the first address of a group is a router's. The Service
// that got it moves, the one that asked for it waits, no one gets it while it
// is marked, and it is handed out again once the mark is cleared.
func TestInUseOnLAN(t *testing.T) {
	g := Group{Name: "lan", Segment: pfx("192.0.2.0/29"), Excluded: pfxs("192.0.2.0"), AutoAssign: true}
	router := map[string]string{"192.0.2.1": "MAC 02:00:00:00:00:cc"}
	runSteps(t, []step{
		{desc: "the first Service gets the lowest free address", groups: []Group{g}, key: "web", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
		{desc: "a host on the LAN answered for it: the Service moves to the next free address", onLAN: router,
			key: "web", req: Request{Families: v4}, want: []string{"192.0.2.2"}},
		{desc: "and stays there", key: "web", req: Request{Families: v4}, want: []string{"192.0.2.2"}},
		{desc: "no one else is given it", key: "db", req: Request{Families: v4}, want: []string{"192.0.2.3"}},
		{desc: "a Service that asks for it by name waits, holding nothing", key: "api", req: Request{Families: v4, IPs: addrs("192.0.2.1")}, wantErr: ErrInUseOnLAN},
		{desc: "imported from the ledger (a restart) and asked for: given up, still waiting", key: "api", assign: []string{"192.0.2.1"}, want: []string{"192.0.2.1"}},
		{desc: "the next Allocate gives it up", key: "api", req: Request{Families: v4, IPs: addrs("192.0.2.1")}, wantErr: ErrInUseOnLAN},
		{desc: "a Service that asks for another address is not held back", key: "other", req: Request{Families: v4, IPs: addrs("192.0.2.5")}, want: []string{"192.0.2.5"}},
		{desc: "the group full: the message counts the address in use", key: "fill1", req: Request{Families: v4}, want: []string{"192.0.2.4"}},
		{desc: "full", key: "fill2", req: Request{Families: v4}, want: []string{"192.0.2.6"}},
		{desc: "full", key: "fill3", req: Request{Families: v4}, want: []string{"192.0.2.7"}},
		{desc: "no free address", key: "late", req: Request{Families: v4}, wantErr: ErrGroupFull},
		{desc: "the mark cleared: the waiting Service gets it", onLAN: map[string]string{"192.0.2.1": ""},
			key: "api", req: Request{Families: v4, IPs: addrs("192.0.2.1")}, want: []string{"192.0.2.1"}},
	})
}

// A mark cleared frees the address for the next Service, below the hint.
func TestInUseOnLANCleared(t *testing.T) {
	g := Group{Name: "lan", Segment: pfx("192.0.2.0/29"), Excluded: pfxs("192.0.2.0"), AutoAssign: true}
	runSteps(t, []step{
		{desc: "marked before any allocation: skipped", groups: []Group{g}, onLAN: map[string]string{"192.0.2.1": "MAC 02:00:00:00:00:cc"},
			key: "a", req: Request{Families: v4}, want: []string{"192.0.2.2"}},
		{desc: "cleared: the next Service gets it", onLAN: map[string]string{"192.0.2.1": ""}, key: "b", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
	})
}

// A full group's message counts the addresses in use on the LAN: the person
// reading it learns why the group is full with fewer Services than addresses.
func TestInUseOnLANCountedWhenFull(t *testing.T) {
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "lan", Segment: pfx("192.0.2.0/30"), Excluded: pfxs("192.0.2.0", "192.0.2.3"), AutoAssign: true})})
	a.SetInUseOnLAN(addrs("192.0.2.1")[0], "02:00:00:00:00:cc", "MAC 02:00:00:00:00:cc")
	if _, err := a.Allocate("web", Request{Families: v4}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Allocate("db", Request{Families: v4})
	if !errors.Is(err, ErrGroupFull) || !strings.Contains(err.Error(), "1 in use on the LAN") {
		t.Fatalf("got %v, want ErrGroupFull counting 1 in use on the LAN", err)
	}
}

// TestInUseOnLANFloodingMAC: a host that answers every probe (proxy ARP, or
// hostile) walks a Service along the group only MaxInUseOnLANPerMAC times;
// past that its answers move no Service in the group: each keeps its address,
// marked. The addresses it answered for are still given to no one (the
// ledger keeps their records). Another host's answer still moves a Service.
func TestInUseOnLANFloodingMAC(t *testing.T) {
	g := Group{Name: "lan", Segment: pfx("192.0.2.0/28"), Excluded: pfxs("192.0.2.0"), AutoAssign: true}
	proxy := func(addr string) map[string]string { return map[string]string{addr: "02:00:00:00:00:ee"} }
	runSteps(t, []step{
		{desc: "web gets the lowest free address", groups: []Group{g}, key: "web", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
		{desc: "the proxy answers: web moves", onLAN: proxy("192.0.2.1"), key: "web", req: Request{Families: v4}, want: []string{"192.0.2.2"}},
		{desc: "again", onLAN: proxy("192.0.2.2"), key: "web", req: Request{Families: v4}, want: []string{"192.0.2.3"}},
		{desc: "again", onLAN: proxy("192.0.2.3"), key: "web", req: Request{Families: v4}, want: []string{"192.0.2.4"}},
		{desc: "the fourth answer: web moves once more", onLAN: proxy("192.0.2.4"), key: "web", req: Request{Families: v4}, want: []string{"192.0.2.5"}},
		{desc: "the fifth: not believed, web keeps its address", onLAN: proxy("192.0.2.5"), key: "web", req: Request{Families: v4}, want: []string{"192.0.2.5"}},
		{desc: "the next Service gets the next free address", key: "db", req: Request{Families: v4}, want: []string{"192.0.2.6"}},
		{desc: "the proxy answers for it too: db keeps it", onLAN: proxy("192.0.2.6"), key: "db", req: Request{Families: v4}, want: []string{"192.0.2.6"}},
		{desc: "an address it answered for is given to no one", key: "api", req: Request{Families: v4, IPs: addrs("192.0.2.3")}, wantErr: ErrInUseOnLAN},
		{desc: "another Service", key: "other", req: Request{Families: v4}, want: []string{"192.0.2.7"}},
		{desc: "another host's answer moves it", onLAN: map[string]string{"192.0.2.7": "02:00:00:00:00:cc"},
			key: "other", req: Request{Families: v4}, want: []string{"192.0.2.8"}},
	})
}

// TestFloodingMACs: which MACs answered for more than MaxInUseOnLANPerMAC of
// a group's addresses, group by group.
func TestFloodingMACs(t *testing.T) {
	lan := mustGroup(t, Group{Name: "lan", Segment: pfx("192.0.2.0/24")})
	other := mustGroup(t, Group{Name: "other", Segment: pfx("198.51.100.0/24")})
	marks := func(mac string, prefix string, n int) map[netip.Addr]string {
		out := map[netip.Addr]string{}
		for i := range n {
			// Each MAC its own addresses: aa from .1, bb from .101.
			out[netip.MustParseAddr(fmt.Sprintf("%s.%d", prefix, int(mac[0]-'a')*100+i+1))] = mac
		}
		return out
	}
	union := func(ms ...map[netip.Addr]string) map[netip.Addr]string {
		out := map[netip.Addr]string{}
		for _, m := range ms {
			maps.Copy(out, m)
		}
		return out
	}
	for _, tc := range []struct {
		desc  string
		marks map[netip.Addr]string
		want  map[string][]string
	}{
		{"none", nil, map[string][]string{}},
		{"a router and a host by hand, one address each", union(marks("aa", "192.0.2", 1), marks("bb", "198.51.100", 1)), map[string][]string{}},
		{"exactly the bound: believed", marks("aa", "192.0.2", MaxInUseOnLANPerMAC), map[string][]string{}},
		{"one past the bound", marks("aa", "192.0.2", MaxInUseOnLANPerMAC+1), map[string][]string{"lan": {"aa"}}},
		{"the bound in each of two groups: counted per group", union(marks("aa", "192.0.2", MaxInUseOnLANPerMAC), marks("aa", "198.51.100", MaxInUseOnLANPerMAC)), map[string][]string{}},
		{"two hosts past it in one group", union(marks("bb", "192.0.2", 5), marks("aa", "192.0.2", 10)), map[string][]string{"lan": {"aa", "bb"}}},
		{"outside every group: nothing", marks("aa", "203.0.113", 20), map[string][]string{}},
	} {
		got := FloodingMACs(tc.marks, []*Group{lan, other})
		if !maps.EqualFunc(got, tc.want, slices.Equal) {
			t.Errorf("%s: %v, want %v", tc.desc, got, tc.want)
		}
	}
}
