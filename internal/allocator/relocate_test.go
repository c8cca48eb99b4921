package allocator

import (
	"errors"
	"testing"
)

// TestRelocateAppliance is the seed scenario: an appliance's API and ingress
// VIPs request .10 and .11 of its external network, other Services got
// addresses automatically, and the appliance moves to a new site.
func TestRelocateAppliance(t *testing.T) {
	siteA := Group{Name: "external", Segment: pfx("192.0.2.0/24"), Excluded: pfxs("192.0.2.0", "192.0.2.255"), AutoAssign: true}
	siteB := Group{Name: "external", Segment: pfx("198.51.100.0/24"), Excluded: pfxs("198.51.100.0", "198.51.100.255"), AutoAssign: true}
	api := Request{Families: v4, IPs: addrs("192.0.2.10")}
	ingress := Request{Families: v4, IPs: addrs("192.0.2.11")}
	runSteps(t, []step{
		{desc: "api requests .10", groups: []Group{siteA}, key: "appliance/api", req: api, want: []string{"192.0.2.10"}},
		{desc: "ingress requests .11", key: "appliance/ingress", req: ingress, want: []string{"192.0.2.11"}},
		{desc: "an auto-assigned one", key: "apps/web", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
		{desc: "another", key: "apps/db", req: Request{Families: v4}, want: []string{"192.0.2.2"}},

		{desc: "the segment moves: an auto-assigned Service gets the next free address of the new segment",
			groups: []Group{siteB}, key: "apps/web", req: Request{Families: v4}, want: []string{"198.51.100.1"}},
		{desc: "a Service whose request is now outside every group keeps its old address and hears why",
			key: "appliance/api", req: api, want: []string{"192.0.2.10"}, wantErr: ErrOutsideGroups},
		{desc: "it stays put on every retry", key: "appliance/api", req: api, want: []string{"192.0.2.10"}, wantErr: ErrOutsideGroups},
		{desc: "fixing the request moves it", key: "appliance/api", req: Request{Families: v4, IPs: addrs("198.51.100.10")}, want: []string{"198.51.100.10"}},
		{desc: "ingress too", key: "appliance/ingress", req: Request{Families: v4, IPs: addrs("198.51.100.11")}, want: []string{"198.51.100.11"}},
		{desc: "the other auto-assigned one", key: "apps/db", req: Request{Families: v4}, want: []string{"198.51.100.2"}},
		{desc: "and nothing moves again", key: "apps/web", req: Request{Families: v4}, want: []string{"198.51.100.1"}},

		{desc: "moving back: the old addresses were released", groups: []Group{siteA}, key: "apps/new", req: Request{Families: v4}, want: []string{"192.0.2.1"}},
		{desc: "the freed requested address is free", key: "appliance/other", req: Request{Families: v4, IPs: addrs("192.0.2.10")}, want: []string{"192.0.2.10"}},
	})
}

// TestRelocateRequestValidInNewSegment: requests edited first, group second.
func TestRelocateRequestValidInNewSegment(t *testing.T) {
	siteA := Group{Name: "external", Segment: pfx("192.0.2.0/24"), AutoAssign: true}
	siteB := Group{Name: "external", Segment: pfx("198.51.100.0/24"), AutoAssign: true}
	moved := Request{Families: v4, IPs: addrs("198.51.100.10")}
	runSteps(t, []step{
		{desc: "api requests .10", groups: []Group{siteA}, key: "api", req: Request{Families: v4, IPs: addrs("192.0.2.10")}, want: []string{"192.0.2.10"}},
		{desc: "request edited before the group: outside every group, keeps the old", key: "api", req: moved, want: []string{"192.0.2.10"}, wantErr: ErrOutsideGroups},
		{desc: "the group moves: the request is valid now", groups: []Group{siteB}, key: "api", req: moved, want: []string{"198.51.100.10"}},
	})
}

func TestRelocateExclusions(t *testing.T) {
	g := Group{Name: "g", Segment: pfx("203.0.113.0/29"), AutoAssign: true}
	excluding := func(ex ...string) []Group {
		e := g
		e.Excluded = pfxs(ex...)
		return []Group{e}
	}
	runSteps(t, []step{
		{desc: "a", groups: []Group{g}, key: "a", req: Request{Families: v4}, want: []string{"203.0.113.0"}},
		{desc: "b", key: "b", req: Request{Families: v4}, want: []string{"203.0.113.1"}},
		{desc: "c requests .5", key: "c", req: Request{Families: v4, IPs: addrs("203.0.113.5")}, want: []string{"203.0.113.5"}},

		{desc: "excluding .1 and .5: a is still allowed and keeps its address", groups: excluding("203.0.113.1", "203.0.113.5"),
			key: "a", req: Request{Families: v4}, want: []string{"203.0.113.0"}},
		{desc: "b moves to the next free one", key: "b", req: Request{Families: v4}, want: []string{"203.0.113.2"}},
		{desc: "c's request is excluded: it gets the next free one and hears why", key: "c", req: Request{Families: v4, IPs: addrs("203.0.113.5")},
			want: []string{"203.0.113.3"}, wantErr: ErrExcluded},
		{desc: "un-excluding .5 gives c its request back", groups: excluding("203.0.113.1"),
			key: "c", req: Request{Families: v4, IPs: addrs("203.0.113.5")}, want: []string{"203.0.113.5"}},
		{desc: "a newcomer gets the address c left", key: "d", req: Request{Families: v4}, want: []string{"203.0.113.3"}},
		{desc: "fill the group", key: "e", req: Request{Families: v4}, want: []string{"203.0.113.4"}},
		{desc: "fill the group", key: "f", req: Request{Families: v4}, want: []string{"203.0.113.6"}},
		{desc: "fill the group", key: "h", req: Request{Families: v4}, want: []string{"203.0.113.7"}},
		{desc: "excluding a's address in a full group: a keeps it, never IP-less", groups: excluding("203.0.113.0", "203.0.113.1"),
			key: "a", req: Request{Families: v4}, want: []string{"203.0.113.0"}, wantErr: ErrCannotRelocate},
		{desc: "the cause is the full group", key: "a", req: Request{Families: v4}, want: []string{"203.0.113.0"}, wantErr: ErrGroupFull},
		{desc: "freeing one lets it move", key: "h", release: true},
		{desc: "a moves to the freed address", key: "a", req: Request{Families: v4}, want: []string{"203.0.113.7"}},
	})
}

func TestRelocateGroupDeleted(t *testing.T) {
	a := Group{Name: "a", Segment: pfx("192.0.2.0/28"), AutoAssign: true}
	b := Group{Name: "b", Segment: pfx("198.51.100.0/28"), AutoAssign: true, Priority: 1}
	covering := Group{Name: "covering", Segment: pfx("198.51.100.0/24"), AutoAssign: true}
	runSteps(t, []step{
		{desc: "x from a", groups: []Group{a, b}, key: "x", req: Request{Families: v4}, want: []string{"192.0.2.0"}},
		{desc: "y from b, by name", key: "y", req: Request{Families: v4, Groups: []string{"b"}}, want: []string{"198.51.100.0"}},
		{desc: "a deleted, Terminating while x holds from it: x keeps its address", groups: []Group{b},
			key: "x", req: Request{Families: v4, Keep: addrs("192.0.2.0")}, want: []string{"192.0.2.0"}},
		{desc: "and on every retry", key: "x", req: Request{Families: v4, Keep: addrs("192.0.2.0")}, want: []string{"192.0.2.0"}},
		{desc: "its address is handed out to no one else", key: "w", req: Request{Families: v4, IPs: addrs("192.0.2.0")}, wantErr: ErrOutsideGroups},
		{desc: "the admin releases a's addresses: x moves to b", key: "x", req: Request{Families: v4}, want: []string{"198.51.100.1"}},
		{desc: "b replaced by a group whose segment covers it: y keeps its address", groups: []Group{covering},
			key: "x", req: Request{Families: v4}, want: []string{"198.51.100.1"}},
		{desc: "y named b, which is gone: it keeps its address and hears why", key: "y", req: Request{Families: v4, Groups: []string{"b"}},
			want: []string{"198.51.100.0"}, wantErr: ErrNoGroup},
		{desc: "and that it cannot move", key: "y", req: Request{Families: v4, Groups: []string{"b"}}, want: []string{"198.51.100.0"}, wantErr: ErrCannotRelocate},
		{desc: "naming the covering group settles it without a move", key: "y", req: Request{Families: v4, Groups: []string{"covering"}}, want: []string{"198.51.100.0"}},
		{desc: "every group deleted: x keeps its address", groups: []Group{}, key: "x", req: Request{Families: v4}, want: []string{"198.51.100.1"}, wantErr: ErrCannotRelocate},
	})
}

func TestRelocateWhoMayUseTheGroup(t *testing.T) {
	onlyProd := func(ns, _ map[string]string) bool { return ns["env"] == "prod" }
	shared := Group{Name: "shared", Segment: pfx("192.0.2.0/28"), AutoAssign: true, Priority: 1}
	prod := Group{Name: "prod", Segment: pfx("198.51.100.0/28"), AutoAssign: true}
	prodOnly := prod
	prodOnly.Admits = onlyProd
	prodLabels := map[string]string{"env": "prod"}
	runSteps(t, []step{
		{desc: "first by priority", groups: []Group{shared, prod}, key: "s", req: Request{Families: v4, NamespaceLabels: prodLabels}, want: []string{"198.51.100.0"}},
		{desc: "t too", key: "t", req: Request{Families: v4}, want: []string{"198.51.100.1"}},
		{desc: "the group now admits only prod: s is admitted and stays", groups: []Group{shared, prodOnly},
			key: "s", req: Request{Families: v4, NamespaceLabels: prodLabels}, want: []string{"198.51.100.0"}},
		{desc: "t is not and moves", key: "t", req: Request{Families: v4}, want: []string{"192.0.2.0"}},
		{desc: "naming another group moves a Service there", key: "s", req: Request{Families: v4, Groups: []string{"shared"}, NamespaceLabels: prodLabels}, want: []string{"192.0.2.1"}},
	})
}

func TestRelocateRequestInUse(t *testing.T) {
	old := Group{Name: "g", Segment: pfx("192.0.2.0/28"), AutoAssign: true}
	moved := Group{Name: "g", Segment: pfx("198.51.100.0/28"), AutoAssign: true}
	runSteps(t, []step{
		{desc: "x", groups: []Group{old}, key: "x", req: Request{Families: v4, IPs: addrs("192.0.2.5")}, want: []string{"192.0.2.5"}},
		{desc: "the group moves; another takes .5 of the new segment first", groups: []Group{moved}, key: "y", req: Request{Families: v4, IPs: addrs("198.51.100.5")}, want: []string{"198.51.100.5"}},
		{desc: "x asks for the taken .5: it gets the next free one and hears why", key: "x", req: Request{Families: v4, IPs: addrs("198.51.100.5")},
			want: []string{"198.51.100.0"}, wantErr: ErrInUse},
		{desc: "once .5 is free", key: "y", release: true},
		{desc: "x takes it", key: "x", req: Request{Families: v4, IPs: addrs("198.51.100.5")}, want: []string{"198.51.100.5"}},
	})
}

// TestRelocateInterrupted: a crash between creating the new ledger object and
// deleting the old one leaves both; the rebuild imports both (status first),
// and the next Allocate finishes the move to the new one, not to another.
func TestRelocateInterrupted(t *testing.T) {
	old := Group{Name: "g", Segment: pfx("192.0.2.0/28"), AutoAssign: true}
	moved := Group{Name: "g", Segment: pfx("198.51.100.0/28"), AutoAssign: true}
	runSteps(t, []step{
		{desc: "crashed before the status patch: status has the old, ledger both", groups: []Group{moved}, key: "a", assign: []string{"192.0.2.1", "198.51.100.7"}, want: []string{"192.0.2.1", "198.51.100.7"}},
		{desc: "the move finishes on the address already taken, not the lowest free", key: "a", req: Request{Families: v4}, want: []string{"198.51.100.7"}},
		{desc: "crashed after the status patch: status has the new one first", key: "b", assign: []string{"198.51.100.9", "192.0.2.2"}, want: []string{"198.51.100.9", "192.0.2.2"}},
		{desc: "it keeps the new one", key: "b", req: Request{Families: v4}, want: []string{"198.51.100.9"}},
		{desc: "both old ones are free", groups: []Group{old}, key: "c", req: Request{Families: v4}, want: []string{"192.0.2.0"}},
		{desc: "both old ones are free", key: "d", req: Request{Families: v4, IPs: addrs("192.0.2.1")}, want: []string{"192.0.2.1"}},
		{desc: "both old ones are free", key: "e", req: Request{Families: v4, IPs: addrs("192.0.2.2")}, want: []string{"192.0.2.2"}},
		{desc: "a requested move interrupted: the requested one wins even if imported second", groups: []Group{moved}, key: "f", assign: []string{"198.51.100.12", "198.51.100.13"}, want: []string{"198.51.100.12", "198.51.100.13"}},
		{desc: "finishing it", key: "f", req: Request{Families: v4, IPs: addrs("198.51.100.13")}, want: []string{"198.51.100.13"}},
		{desc: "an interrupted move to a request that the group then left", key: "g", assign: []string{"192.0.2.3", "192.0.2.4"}, want: []string{"192.0.2.3", "192.0.2.4"}},
		{desc: "keeps the requested one until the request is fixed", key: "g", req: Request{Families: v4, IPs: addrs("192.0.2.4")}, want: []string{"192.0.2.4"}, wantErr: ErrOutsideGroups},
	})
}

func TestRelocateDualStackMovesOnlyTheStrandedFamily(t *testing.T) {
	v4a := Group{Name: "v4", Segment: pfx("192.0.2.0/28"), AutoAssign: true}
	v4b := Group{Name: "v4", Segment: pfx("203.0.113.0/28"), AutoAssign: true}
	six := Group{Name: "v6", Segment: pfx("2001:db8::/64"), AutoAssign: true}
	runSteps(t, []step{
		{desc: "dual", groups: []Group{v4a, six}, key: "d", req: Request{Families: dual}, want: []string{"192.0.2.0", "2001:db8::1"}},
		{desc: "the IPv4 group moves; IPv6 stays", groups: []Group{v4b, six}, key: "d", req: Request{Families: dual}, want: []string{"203.0.113.0", "2001:db8::1"}},
	})
}

func TestRelocationErrorNamesAddressCauseAndFix(t *testing.T) {
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "g", Segment: pfx("192.0.2.0/31"), AutoAssign: true})})
	for _, k := range []string{"x", "y"} {
		if _, err := a.Allocate(k, Request{Families: v4}); err != nil {
			t.Fatal(err)
		}
	}
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "g", Segment: pfx("192.0.2.0/31"), Excluded: pfxs("192.0.2.0"), AutoAssign: true})})
	held, err := a.Allocate("x", Request{Families: v4})
	if len(held) != 1 || held[0] != addrs("192.0.2.0")[0] {
		t.Fatalf("holds %v, want it to keep 192.0.2.0", held)
	}
	if !errors.Is(err, ErrCannotRelocate) || !errors.Is(err, ErrGroupFull) {
		t.Fatalf("error %v: want ErrCannotRelocate and ErrGroupFull", err)
	}
	want := "192.0.2.0 is no longer allowed by an IPGroup that admits this Service (segment, addresses, excludedIPs, avoidBuggyIPs or selectors changed) and cannot move: " +
		"no free IPv4 address in IPGroup g (1 of 1 in use); add addresses to a group, create another group, or free an address"
	if err.Error() != want {
		t.Fatalf("got %q\nwant %q", err, want)
	}
}

// TestRelocateKept: an address its group protects stays with its key until
// the group releases it (the caller stops passing it in Keep), unless the key
// asks for another one.
func TestRelocateKept(t *testing.T) {
	g := Group{Name: "g", Segment: pfx("203.0.113.0/29"), AutoAssign: true}
	shrunk := Group{Name: "g", Segment: pfx("203.0.113.0/30"), Excluded: pfxs("203.0.113.1"), AutoAssign: true}
	kept := func(ips ...string) Request { return Request{Families: v4, Keep: addrs(ips...)} }
	runSteps(t, []step{
		{desc: "a", groups: []Group{g}, key: "a", req: Request{Families: v4}, want: []string{"203.0.113.0"}},
		{desc: "b", key: "b", req: Request{Families: v4}, want: []string{"203.0.113.1"}},
		{desc: "c", key: "c", req: Request{Families: v4}, want: []string{"203.0.113.2"}},
		{desc: "d requests .6", key: "d", req: Request{Families: v4, IPs: addrs("203.0.113.6")}, want: []string{"203.0.113.6"}},
		{desc: "the group excludes .1 and shrinks to a /30: b keeps its excluded address", groups: []Group{shrunk}, key: "b", req: kept("203.0.113.1"), want: []string{"203.0.113.1"}},
		{desc: "d keeps the address now outside the group, though its request is refused", key: "d",
			req: Request{Families: v4, IPs: addrs("203.0.113.6"), Keep: addrs("203.0.113.6")}, want: []string{"203.0.113.6"}, wantErr: ErrOutsideGroups},
		{desc: "a still-allowed address needs no keeping", key: "a", req: Request{Families: v4}, want: []string{"203.0.113.0"}},
		{desc: "a kept address is not handed out again", key: "e", req: Request{Families: v4}, want: []string{"203.0.113.3"}},
		{desc: "released: b moves when an address is free, and there is none", key: "b", req: Request{Families: v4}, want: []string{"203.0.113.1"}, wantErr: ErrCannotRelocate},
		{desc: "d asks for an address in use: it keeps the kept one and hears why", key: "d",
			req: Request{Families: v4, IPs: addrs("203.0.113.3"), Keep: addrs("203.0.113.6")}, want: []string{"203.0.113.6"}, wantErr: ErrInUse},
		{desc: "d asks for a valid free address: it moves", groups: []Group{g}, key: "d",
			req: Request{Families: v4, IPs: addrs("203.0.113.5"), Keep: addrs("203.0.113.6")}, want: []string{"203.0.113.5"}},
	})
}
