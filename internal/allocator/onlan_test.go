package allocator

import "testing"

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
