package allocator

import (
	"errors"
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
	a.SetInUseOnLAN(addrs("192.0.2.1")[0], "MAC 02:00:00:00:00:cc")
	if _, err := a.Allocate("web", Request{Families: v4}); err != nil {
		t.Fatal(err)
	}
	_, err := a.Allocate("db", Request{Families: v4})
	if !errors.Is(err, ErrGroupFull) || !strings.Contains(err.Error(), "1 in use on the LAN") {
		t.Fatalf("got %v, want ErrGroupFull counting 1 in use on the LAN", err)
	}
}
