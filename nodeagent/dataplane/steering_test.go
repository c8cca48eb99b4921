package dataplane

import (
	"fmt"
	"net/netip"
	"slices"
	"strings"
	"testing"

	"github.com/vishvananda/netlink"

	"github.com/paas-org/vip-allocator-operator/internal/steering"
)

// onNode is ep on node: local when node is "node1", the node the tests render for.
func onNode(node, addr string, ports ...string) Endpoint {
	e := ep(addr, node == "node1", ports...)
	e.Node = node
	return e
}

func threeNodeWeb(steer bool) Service {
	s := web(onNode("node1", "198.51.100.1", "http/8080"), onNode("node2", "198.51.100.2", "http/8080"), onNode("node3", "198.51.100.3", "http/8080"))
	s.VIPs = addrs("192.0.2.10")
	s.Steer = steer
	return s
}

var threePeers = Steering{Node: "node1", Peers: map[string]netip.Addr{
	"node1": netip.MustParseAddr("203.0.113.11"),
	"node2": netip.MustParseAddr("203.0.113.12"),
	"node3": netip.MustParseAddr("203.0.113.13"),
	"v6":    netip.MustParseAddr("2001:db8::14"), // another family: no mark in IPv4
}}

// renderSteered spells every element of services as the plane on node1 with steering s would write.
func renderSteered(s *Steering, services ...Service) []string {
	var v *steerView
	if s != nil {
		v = newSteerView(IPv4, *s)
	}
	var out []string
	planNFTablesReusing(IPv4, services, nil, nil, nil, v).state.each(func(e nftElem) { out = append(out, e.String()) })
	slices.Sort(out)
	return out
}

// without drops the elements of set.
func without(elems []string, set string) []string {
	return slices.DeleteFunc(slices.Clone(elems), func(e string) bool { return strings.HasPrefix(e, set+" ") })
}

// only keeps the elements of set.
func only(elems []string, set string) []string {
	return slices.DeleteFunc(slices.Clone(elems), func(e string) bool { return !strings.HasPrefix(e, set+" ") })
}

func TestSteerView(t *testing.T) {
	v := newSteerView(IPv4, threePeers)
	if want := map[string]uint32{"node2": 1, "node3": 2}; v.self != "node1" || fmt.Sprint(v.marks) != fmt.Sprint(want) {
		t.Fatalf("view %+v, want self node1 and marks %v (itself and other families unmarked)", v, want)
	}
	if newSteerView(IPv4, Steering{Peers: threePeers.Peers}) != nil {
		t.Fatal("a view without this node's name: nothing may be steered")
	}
}

func TestSteeredElements(t *testing.T) {
	table := steering.Build([]steering.Node{{Name: "node1", Weight: 1}, {Name: "node2", Weight: 1}, {Name: "node3", Weight: 1}}, steerBuckets)
	// Every bucket of another node, to its mark; this node's buckets fall through.
	var wantSteer []string
	for b := range steerBuckets {
		switch table.Owner(b) {
		case "node2":
			wantSteer = append(wantSteer, fmt.Sprintf("steer 192.0.2.10 . 6 . 80 . %d : 0x1", b))
		case "node3":
			wantSteer = append(wantSteer, fmt.Sprintf("steer 192.0.2.10 . 6 . 80 . %d : 0x2", b))
		}
	}
	slices.Sort(wantSteer)
	if len(wantSteer) < steerBuckets/2 || len(wantSteer) > steerBuckets*5/6 {
		t.Fatalf("%d of %d buckets on the other two nodes: the table is not shared out", len(wantSteer), steerBuckets)
	}
	today := []string{
		"endpoints_3 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
		"endpoints_3 192.0.2.10 . 6 . 80 . 1 : 198.51.100.2 . 8080",
		"endpoints_3 192.0.2.10 . 6 . 80 . 2 : 198.51.100.3 . 8080",
		"masquerade 192.0.2.10 . 6 . 80",
		"vips 192.0.2.10",
	}
	for _, tc := range []struct {
		name     string
		steering *Steering
		services []Service
		want     []string // without the steer map's elements
		steer    []string // the steer map's elements
	}{
		{name: "steered: serve with the local endpoint, unmasqueraded; steer the other nodes' buckets",
			steering: &threePeers, services: []Service{threeNodeWeb(true)},
			want: []string{
				"endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"hairpin 192.0.2.10 . 6 . 80 . 198.51.100.1",
				"vips 192.0.2.10",
			},
			steer: wantSteer},
		{name: "the IPGroup keeps the entry node's DNAT: today's elements",
			steering: &threePeers, services: []Service{threeNodeWeb(false)}, want: today},
		{name: "a plane told no peers steers nothing",
			services: []Service{threeNodeWeb(true)}, want: today},
		{name: "session affinity: steered by the client's address alone",
			steering: &threePeers, services: []Service{func() Service { s := threeNodeWeb(true); s.Affinity = 30e9; return s }()},
			want: []string{
				"affinity_30 192.0.2.10 . 6 . 80",
				"endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"hairpin 192.0.2.10 . 6 . 80 . 198.51.100.1",
				"steer_client 192.0.2.10 . 6 . 80",
				"vips 192.0.2.10",
			},
			steer: wantSteer},
		{name: "a peer with no address in the family has no mark: its buckets fall through",
			steering: &Steering{Node: "node1", Peers: map[string]netip.Addr{"node2": netip.MustParseAddr("203.0.113.12")}},
			services: []Service{threeNodeWeb(true)},
			want: []string{
				"endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.1 . 8080",
				"hairpin 192.0.2.10 . 6 . 80 . 198.51.100.1",
				"vips 192.0.2.10",
			},
			steer: slices.DeleteFunc(slices.Clone(wantSteer), func(e string) bool { return strings.HasSuffix(e, ": 0x2") })},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := renderSteered(tc.steering, tc.services...)
			if rest := without(got, "steer"); !slices.Equal(rest, tc.want) {
				t.Errorf("elements\n got %q\nwant %q", rest, tc.want)
			}
			if steer := only(got, "steer"); !slices.Equal(steer, tc.steer) {
				t.Errorf("steer map: %d elements, want %d\n got %q\nwant %q", len(steer), len(tc.steer), steer, tc.steer)
			}
		})
	}
}

func TestSteeredWithoutLocalEndpoints(t *testing.T) {
	s := threeNodeWeb(true)
	s.Endpoints = s.Endpoints[1:] // none on node1: every bucket goes elsewhere
	got := renderSteered(&threePeers, s)
	if n := len(only(got, "steer")); n != steerBuckets {
		t.Fatalf("%d steered buckets, want all %d", n, steerBuckets)
	}
	if slices.ContainsFunc(got, func(e string) bool { return strings.HasPrefix(e, "endpoints_") || strings.HasPrefix(e, "masquerade") }) {
		t.Fatalf("a node without endpoints DNATs or masquerades: %q", got)
	}
	// The port is still claimed: another Service on the same VIP and port writes nothing.
	thief := threeNodeWeb(true)
	thief.Name = "a-thief"
	thief.Endpoints = []Endpoint{onNode("node1", "198.51.100.9", "http/8080")}
	both := renderSteered(&threePeers, s, thief)
	if !slices.Contains(both, "endpoints_1 192.0.2.10 . 6 . 80 . 0 : 198.51.100.9 . 8080") || len(only(both, "steer")) != 0 {
		// a-thief sorts first and takes the port; web then writes no steer elements.
		t.Fatalf("two Services on one port: %q", both)
	}
}

func TestSteeredChangeMovesOnlyTheGoneNodesBuckets(t *testing.T) {
	v := newSteerView(IPv4, threePeers)
	before := planNFTablesReusing(IPv4, []Service{threeNodeWeb(true)}, nil, nil, nil, v)
	s := threeNodeWeb(true)
	s.Endpoints = slices.DeleteFunc(s.Endpoints, func(e Endpoint) bool { return e.Node == "node3" })
	p := planNFTablesReusing(IPv4, []Service{s}, before.state, nil, nil, v)
	for _, e := range p.del {
		if e.set == setSteer && !strings.HasSuffix(e.String(), ": 0x2") {
			t.Errorf("deleted %s: not node3's", e)
		}
	}
	for _, e := range p.add {
		if e.set == setSteer && !strings.HasSuffix(e.String(), ": 0x1") {
			t.Errorf("added %s: node3's buckets go to node1 (no element) or node2 only", e)
		}
	}
	if len(p.del) == 0 {
		t.Fatal("node3 left and nothing was deleted")
	}
}

func TestSteerRoutes(t *testing.T) {
	v := newSteerView(IPv4, threePeers)
	rules, routes := steerRoutes(IPv4, v, threePeers.Peers)
	var got []string
	for i := range rules {
		got = append(got, fmt.Sprintf("fwmark %#x/%#x prio %d table %d: default via %s", rules[i].Mark, *rules[i].Mask, rules[i].Priority, rules[i].Table, routes[i].Gw))
		if routes[i].Table != rules[i].Table || routes[i].Family != netlink.FAMILY_V4 {
			t.Errorf("route %v is not in its rule's table %d", routes[i], rules[i].Table)
		}
	}
	want := []string{
		"fwmark 0x1/0xff prio 30900 table 5601: default via 203.0.113.12",
		"fwmark 0x2/0xff prio 30900 table 5602: default via 203.0.113.13",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("routes\n got %q\nwant %q", got, want)
	}
}
