package allocator

import (
	"errors"
	"slices"
	"strings"
	"testing"
)

func dnsSharing(ns, key string, ports ...Port) Sharing {
	return Sharing{Key: key, Namespace: ns, Ports: ports}
}

var (
	tcp53 = Port{Protocol: "TCP", Port: 53}
	udp53 = Port{Protocol: "UDP", Port: 53}
	tcp80 = Port{Protocol: "TCP", Port: 80}
)

func TestSharing(t *testing.T) {
	lan := Group{Name: "lan", Segment: pfx("192.0.2.0/24"), Excluded: pfxs("192.0.2.0"), AutoAssign: true}
	lan6 := Group{Name: "lan6", Segment: pfx("2001:db8::/120"), Excluded: pfxs("2001:db8::"), AutoAssign: true}
	share := func(ns, key string, ports ...Port) Request {
		return Request{Families: v4, Sharing: dnsSharing(ns, key, ports...)}
	}
	local := func(r Request, sel string) Request { r.Sharing.LocalEndpoints = sel; return r }
	cross := func(r Request, nss ...string) Request { r.Sharing.CrossNamespace = nss; return r }
	runSteps(t, []step{
		{desc: "first of a key gets a free address", groups: []Group{lan, lan6}, key: "a/dns-tcp", req: share("a", "dns", tcp53), want: []string{"192.0.2.1"}},
		{desc: "same key, other protocol: same address", key: "a/dns-udp", req: share("a", "dns", udp53), want: []string{"192.0.2.1"}},
		{desc: "idempotent", key: "a/dns-udp", req: share("a", "dns", udp53), want: []string{"192.0.2.1"}},
		{desc: "a port collision stays pending", key: "a/dns-tcp2", req: share("a", "dns", tcp53), wantErr: ErrSharedPortCollision},
		{desc: "no key: another address", key: "a/web", req: Request{Families: v4}, want: []string{"192.0.2.2"}},
		{desc: "same key in another namespace: its own address", key: "b/dns", req: share("b", "dns", tcp53), want: []string{"192.0.2.3"}},
		{desc: "cross-namespace on one side only: its own address", key: "c/dns", req: cross(share("c", "dns", tcp80), "a"), want: []string{"192.0.2.4"}},
		{desc: "a key asking for a shared address without the key is refused", key: "a/other", req: Request{Families: v4, IPs: addrs("192.0.2.1")}, wantErr: ErrInUse},
		{desc: "another key asking for it is refused", key: "a/other", req: Request{Families: v4, IPs: addrs("192.0.2.1"), Sharing: dnsSharing("a", "ntp", tcp80)}, wantErr: ErrInUse},
		{desc: "requesting the shared address with the key joins it", key: "a/web2", req: Request{Families: v4, IPs: addrs("192.0.2.1"), Sharing: dnsSharing("a", "dns", tcp80)}, want: []string{"192.0.2.1"}},
		{desc: "requesting it with a colliding port is refused", key: "a/web3", req: Request{Families: v4, IPs: addrs("192.0.2.1"), Sharing: dnsSharing("a", "dns", tcp80)}, wantErr: ErrSharedPortCollision},
		{desc: "the first holder leaves: the address stays", key: "a/dns-tcp", release: true},
		{desc: "the pending one now fits", key: "a/dns-tcp2", req: share("a", "dns", tcp53), want: []string{"192.0.2.1"}},
		{desc: "freed addresses are not the shared one", key: "x/new", req: Request{Families: v4}, want: []string{"192.0.2.5"}},
		{desc: "the others leave", key: "a/dns-udp", release: true},
		{desc: "one holder left", key: "a/web2", release: true},
		{desc: "last holder leaves", key: "a/dns-tcp2", release: true},
		{desc: "the address is free again", key: "x/new2", req: Request{Families: v4}, want: []string{"192.0.2.1"}},

		{desc: "Local with selector app=x", key: "l/a", req: local(share("l", "k", tcp53), "app=x"), want: []string{"192.0.2.6"}},
		{desc: "Local with another selector is refused", key: "l/b", req: local(share("l", "k", udp53), "app=y"), wantErr: ErrSharedEndpointsDiffer},
		{desc: "Local with the same selector joins", key: "l/c", req: local(share("l", "k", udp53), "app=x"), want: []string{"192.0.2.6"}},
		{desc: "Cluster joins a Local group", key: "l/d", req: share("l", "k", tcp80), want: []string{"192.0.2.6"}},

		{desc: "cross-namespace, both sides listing each other", key: "p/dns", req: cross(share("p", "g", tcp53), "q"), want: []string{"192.0.2.7"}},
		{desc: "q lists p", key: "q/dns", req: cross(share("q", "g", udp53), "p"), want: []string{"192.0.2.7"}},
		{desc: "r lists * but p does not list r: own address", key: "r/dns", req: cross(share("r", "g", tcp80), "*"), want: []string{"192.0.2.8"}},

		{desc: "dual-stack shares per family", key: "d/a", req: Request{Families: dual, Sharing: dnsSharing("d", "d", tcp53)}, want: []string{"192.0.2.9", "2001:db8::1"}},
		{desc: "dual-stack joins both", key: "d/b", req: Request{Families: dual, Sharing: dnsSharing("d", "d", udp53)}, want: []string{"192.0.2.9", "2001:db8::1"}},
		{desc: "single-stack joins its family", key: "d/c", req: Request{Families: v6, Sharing: dnsSharing("d", "d", tcp80)}, want: []string{"2001:db8::1"}},
		{desc: "dual-stack turned single leaves the other family only", key: "d/b", req: Request{Families: v6, Sharing: dnsSharing("d", "d", udp53)}, want: []string{"2001:db8::1"}},

		{desc: "removing the key moves the Service off the shared address", key: "l/d", req: Request{Families: v4}, want: []string{"192.0.2.10"}},
		{desc: "changing the key does too", key: "l/c", req: local(share("l", "other", udp53), "app=x"), want: []string{"192.0.2.11"}},
	})
}

func TestSharingRebuild(t *testing.T) {
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "lan", Segment: pfx("192.0.2.0/24"), AutoAssign: true})})
	addr := addrs("192.0.2.20")
	a.SetSharing("a/tcp", dnsSharing("a", "dns", tcp53))
	a.SetSharing("a/udp", dnsSharing("a", "dns", udp53))
	a.SetSharing("a/clash", dnsSharing("a", "dns", tcp53))
	a.SetSharing("b/tcp", dnsSharing("b", "dns", tcp80))
	for _, key := range []string{"a/tcp", "a/udp", "a/clash"} {
		if err := a.Assign(key, addr...); err != nil {
			t.Fatalf("assign %s: %v", key, err)
		}
	}
	if err := a.Assign("b/tcp", addr...); err == nil || !strings.Contains(err.Error(), "namespace") {
		t.Fatalf("another namespace's key imported onto the address: %v", err)
	}
	if err := a.Assign("a/plain", addr...); err == nil {
		t.Fatal("a key that does not share imported onto a shared address")
	}
	if got := a.Holders(addr[0]); !slices.Equal(got, []string{"a/tcp", "a/udp", "a/clash"}) {
		t.Fatalf("holders %v", got)
	}
	checkNoDuplicates(t, a)
	// What the ledger recorded is kept through the rebuild; the collision is
	// reported at the next Allocate, which keeps the address.
	got, err := a.Allocate("a/clash", Request{Families: v4, Sharing: dnsSharing("a", "dns", tcp53)})
	if !slices.Equal(got, addr) || err == nil {
		t.Fatalf("Allocate after rebuild: %v, %v; want the address kept and the collision reported", got, err)
	}
}

func TestSharedIPFull(t *testing.T) {
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "lan", Segment: pfx("192.0.2.0/24"), AutoAssign: true})})
	for i := range MaxSharers {
		if _, err := a.Allocate("a/s"+string(rune('A'+i/26))+string(rune('a'+i%26)), Request{Families: v4, Sharing: dnsSharing("a", "k", Port{Protocol: "TCP", Port: int32(1000 + i)})}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := a.Allocate("a/last", Request{Families: v4, Sharing: dnsSharing("a", "k", Port{Protocol: "TCP", Port: 1})}); err == nil || !strings.Contains(err.Error(), "most one address") {
		t.Fatalf("holder %d accepted: %v", MaxSharers+1, err)
	}
	checkNoDuplicates(t, a)
}

// portRange is n ports of proto from first on.
func portRange(proto string, first, n int) []Port {
	out := make([]Port, n)
	for i := range out {
		out[i] = Port{Protocol: proto, Port: int32(first + i)}
	}
	return out
}

func TestSharedPortsBound(t *testing.T) {
	lan := Group{Name: "lan", Segment: pfx("192.0.2.0/24"), Excluded: pfxs("192.0.2.0"), AutoAssign: true}
	share := func(ns string, ports ...Port) Request {
		return Request{Families: v4, Sharing: dnsSharing(ns, "k", ports...)}
	}
	half := MaxSharedPorts / 2
	runSteps(t, []step{
		{desc: "half the bound", groups: []Group{lan}, key: "a/one", req: share("a", portRange("TCP", 1, half)...), want: []string{"192.0.2.1"}},
		{desc: "the other half joins: the bound is admitted", key: "a/two", req: share("a", portRange("TCP", half+1, half)...), want: []string{"192.0.2.1"}},
		{desc: "one port more is refused", key: "a/three", req: share("a", udp53), wantErr: ErrSharedTooManyPorts},
		{desc: "asking for the address does not help", key: "a/three", req: Request{Families: v4, IPs: addrs("192.0.2.1"), Sharing: dnsSharing("a", "k", udp53)}, wantErr: ErrSharedTooManyPorts},
		{desc: "a holder gives ports up: the pending one fits", key: "a/two", req: share("a", portRange("TCP", half+1, half-1)...), want: []string{"192.0.2.1"}},
		{desc: "it joins", key: "a/three", req: share("a", udp53), want: []string{"192.0.2.1"}},
		{desc: "a holder edited past the bound keeps its address and hears why", key: "a/one", req: share("a", portRange("TCP", 1, 2*half)...), want: []string{"192.0.2.1"}, wantErr: ErrSharedTooManyPorts},

		{desc: "a large group", key: "b/one", req: share("b", portRange("UDP", 1, 2000)...), want: []string{"192.0.2.2"}},
		{desc: "its last port collides with the other's first", key: "b/two", req: share("b", portRange("UDP", 2000, 2000)...), wantErr: ErrSharedPortCollision},
		{desc: "another protocol on the same numbers does not", key: "b/two", req: share("b", portRange("SCTP", 1, 2000)...), want: []string{"192.0.2.2"}},

		{desc: "alone, a Service may have more ports than the bound", key: "c/big", req: share("c", portRange("TCP", 1, 30000)...), want: []string{"192.0.2.3"}},
		{desc: "nobody may join it", key: "c/small", req: share("c", udp53), wantErr: ErrSharedTooManyPorts},
		{desc: "nor another as large", key: "c/big2", req: share("c", portRange("TCP", 30001, 30000)...), wantErr: ErrSharedTooManyPorts},
	})
}

// TestSharedPortsBoundImported: a pair past the bound that the ledger
// recorded is imported as it is; each keeps its address and hears why.
func TestSharedPortsBoundImported(t *testing.T) {
	a := New()
	a.SetGroups([]*Group{mustGroup(t, Group{Name: "lan", Segment: pfx("192.0.2.0/24"), AutoAssign: true})})
	addr := addrs("192.0.2.20")
	reqs := map[string]Request{
		"h/one": {Families: v4, Sharing: dnsSharing("h", "k", portRange("TCP", 1, 30000)...)},
		"h/two": {Families: v4, Sharing: dnsSharing("h", "k", portRange("TCP", 30001, 30000)...)},
	}
	for key, req := range reqs {
		a.SetSharing(key, req.Sharing)
		if err := a.Assign(key, addr...); err != nil {
			t.Fatalf("assign %s: %v", key, err)
		}
	}
	for key, req := range reqs {
		got, err := a.Allocate(key, req)
		if !slices.Equal(got, addr) || !errors.Is(err, ErrSharedTooManyPorts) || !strings.Contains(err.Error(), "carries at most 4096") {
			t.Fatalf("%s: %v, %v; want the address kept and too many ports reported", key, got, err)
		}
	}
}
