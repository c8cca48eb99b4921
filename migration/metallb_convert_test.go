package migration

import (
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// mlb builds a MetalLB object from its kind, name and spec in YAML.
func mlb(t *testing.T, version, kind, name, spec string) unstructured.Unstructured {
	t.Helper()
	m := map[string]any{}
	if err := yaml.Unmarshal([]byte(spec), &m); err != nil {
		t.Fatal(err)
	}
	u := unstructured.Unstructured{Object: map[string]any{"apiVersion": "metallb.io/" + version, "kind": kind,
		"metadata": map[string]any{"name": name, "namespace": "metallb-system"}, "spec": m}}
	return u
}

func lbService(ns, name string, created int, ann map[string]string, ips ...string) corev1.Service {
	s := corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Annotations: ann,
		CreationTimestamp: metav1.NewTime(time.Unix(int64(created), 0))},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip})
	}
	return s
}

func groupNamed(p MetalLBPlan, name string) GroupConversion {
	for _, g := range p.Groups {
		if g.Pool == name {
			return g
		}
	}
	return GroupConversion{}
}

func droppedHas(dropped []string, part string) bool {
	return slices.ContainsFunc(dropped, func(d string) bool { return strings.Contains(d, part) })
}

func TestConvertMetalLBPools(t *testing.T) {
	st := MetalLBState{Namespace: "metallb-system", Pools: []unstructured.Unstructured{
		mlb(t, "v1beta1", "IPAddressPool", "web", `{addresses: ["192.0.2.10 - 192.0.2.19", "192.0.2.64/29"]}`),
		mlb(t, "v1beta1", "IPAddressPool", "gold", `{addresses: ["198.51.100.0/28"], autoAssign: false, avoidBuggyIPs: true,
			serviceAllocation: {priority: 5, namespaces: [b, a], namespaceSelectors: [{matchLabels: {x: z}}], serviceSelectors: [{matchLabels: {tier: front}}]}}`),
		mlb(t, "v1beta1", "IPAddressPool", "both", `{addresses: ["203.0.113.0/28", "bogus"]}`),
		mlb(t, "v1beta1", "IPAddressPool", "silent", `{addresses: ["203.0.113.64/28"]}`),
	}, L2Ads: []unstructured.Unstructured{
		mlb(t, "v1beta1", "L2Advertisement", "l2-a", `{ipAddressPools: [web, both], interfaces: [eth1], nodeSelectors: [{matchLabels: {l2: "a"}}]}`),
		mlb(t, "v1beta1", "L2Advertisement", "l2-b", `{ipAddressPools: [web], interfaces: [eth2, eth1], nodeSelectors: [{matchLabels: {l2: "b"}}]}`),
		mlb(t, "v1beta1", "L2Advertisement", "gold-l2", `{ipAddressPools: [gold], serviceSelectors: [{matchLabels: {a: b}}]}`),
		mlb(t, "v1beta1", "L2Advertisement", "nothing", `{ipAddressPools: [absent]}`),
	}, BGPAds: []unstructured.Unstructured{
		mlb(t, "v1beta1", "BGPAdvertisement", "both-bgp", `{ipAddressPools: [both], aggregationLength: 24, localPref: 100, communities: [hcp, "large:64512:1:2", "no-such-alias"], peers: [tor]}`),
		mlb(t, "v1beta1", "BGPAdvertisement", "both-bgp2", `{ipAddressPools: [both], localPref: 200, aggregationLengthV6: 128, peers: [edge, tor]}`),
	}, Communities: []unstructured.Unstructured{
		mlb(t, "v1beta1", "Community", "c", `{communities: [{name: hcp, value: "64512:300"}]}`),
	}}
	p := ConvertMetalLB(st)

	web := groupNamed(p, "web")
	if !slices.Equal(web.Group.Spec.Addresses, []string{"192.0.2.10-192.0.2.19", "192.0.2.64/29"}) || *web.Group.Spec.AutoAssign != true || web.Group.Spec.Priority != metallbNoPriority {
		t.Errorf("web: addresses %v, autoAssign %v, priority %d; want the pool's parts, true, %d (MetalLB tries pools without priority last)",
			web.Group.Spec.Addresses, *web.Group.Spec.AutoAssign, web.Group.Spec.Priority, metallbNoPriority)
	}
	if a := web.Group.Spec.Announce; a.Mode != paasv1.AnnounceL2 || !slices.Equal(a.Interfaces, []string{"eth1", "eth2"}) || a.NodeSelector.MatchLabels["l2"] != "a" {
		t.Errorf("web announce = %+v; want L2 on eth1, eth2, the first node selector", a)
	}
	if !droppedHas(web.Dropped, "2 selectors, ORed in MetalLB") {
		t.Errorf("web: the second advertisement's node selector is not reported: %v", web.Dropped)
	}

	gold := groupNamed(p, "gold")
	s := gold.Group.Spec
	if *s.AutoAssign || s.Priority != 5 || !s.AvoidBuggyIPs {
		t.Errorf("gold: autoAssign %v priority %d avoidBuggyIPs %v; want false, 5, true", *s.AutoAssign, s.Priority, s.AvoidBuggyIPs)
	}
	if got := metav1.FormatLabelSelector(s.NamespaceSelector); got != "kubernetes.io/metadata.name in (a,b)" {
		t.Errorf("gold namespaceSelector = %s", got)
	}
	if s.ServiceSelector.MatchLabels["tier"] != "front" {
		t.Errorf("gold serviceSelector = %v", s.ServiceSelector)
	}
	if !droppedHas(gold.Dropped, "namespaceSelectors (1) next to serviceAllocation.namespaces") || !droppedHas(gold.Dropped, "L2Advertisement gold-l2 serviceSelectors") {
		t.Errorf("gold dropped = %v", gold.Dropped)
	}

	both := groupNamed(p, "both")
	b := both.Group.Spec.Announce
	if b.Mode != paasv1.AnnounceBGP || !slices.Equal(b.BGP.Peers, []string{"edge", "tor"}) || !slices.Equal(b.BGP.Communities, []string{"64512:1:2", "64512:300"}) || *b.BGP.LocalPref != 100 {
		t.Errorf("both announce = %+v bgp %+v; want BGP to edge, tor with the alias resolved and large: dropped, localPref 100", b, b.BGP)
	}
	for _, want := range []string{"aggregationLength 24", `community "no-such-alias"`, "localPref [100 200]", "by L2 and BGP at once", `address range "bogus"`} {
		if want == `address range "bogus"` {
			want = `"bogus" is neither a CIDR nor a range`
		}
		if !droppedHas(both.Dropped, want) {
			t.Errorf("both: %q not reported in %v", want, both.Dropped)
		}
	}
	if droppedHas(both.Dropped, "aggregationLengthV6") {
		t.Errorf("both: aggregationLengthV6 128 is a host route and must not be reported: %v", both.Dropped)
	}
	if silent := groupNamed(p, "silent"); silent.Group.Spec.Announce.Mode != paasv1.AnnounceNone {
		t.Errorf("silent: mode %s, want None (no advertisement)", silent.Group.Spec.Announce.Mode)
	}
	if !slices.ContainsFunc(p.Notes, func(n string) bool { return strings.Contains(n, "L2Advertisement nothing selects no IPAddressPool") }) {
		t.Errorf("notes = %v", p.Notes)
	}
}

func TestConvertMetalLBPeers(t *testing.T) {
	st := MetalLBState{Namespace: "metallb-system", Peers: []unstructured.Unstructured{
		mlb(t, "v1beta2", "BGPPeer", "tor", `{myASN: 64512, peerASN: 64513, peerAddress: 198.51.100.254, holdTime: 9s, bfdProfile: fast,
			passwordSecret: {name: tor-pw}, nodeSelectors: [{matchLabels: {rack: "1"}}], enableGracefulRestart: true, connectTime: 5s}`),
		mlb(t, "v1beta1", "BGPPeer", "edge", `{myASN: 64512, peerASN: 64514, peerAddress: 203.0.113.254, peerPort: 1179, ebgpMultiHop: true, bfdProfile: fast, password: s3cret, keepaliveTime: 10s}`),
		mlb(t, "v1beta2", "BGPPeer", "red", `{myASN: 64512, peerASN: 64515, peerAddress: 198.51.100.253, vrf: red}`),
		mlb(t, "v1beta2", "BGPPeer", "dyn", `{myASN: 64512, dynamicASN: external, interface: eth0}`),
	}, BFDProfiles: []unstructured.Unstructured{
		mlb(t, "v1beta1", "BFDProfile", "fast", `{receiveInterval: 100, transmitInterval: 150, detectMultiplier: 4, echoMode: true}`),
	}}
	p := ConvertMetalLB(st)
	peers := map[string]PeerConversion{}
	for _, c := range p.Peers {
		peers[c.Name] = c
	}
	tor := peers["tor"]
	s := tor.Peer.Spec
	if s.HoldTime.Duration != 9*time.Second || s.KeepaliveTime.Duration != 3*time.Second || s.PeerPort != 179 || *s.GracefulRestart != true ||
		*s.BFD.ReceiveInterval != 100 || *s.BFD.TransmitInterval != 150 || *s.BFD.DetectMultiplier != 4 || s.NodeSelector.MatchLabels["rack"] != "1" {
		t.Errorf("tor spec = %+v", s)
	}
	if tor.PasswordFrom.String() != "metallb-system/tor-pw" || s.PasswordSecret.Name != MetalLBPasswordSecret || s.PasswordSecret.Key != "tor" {
		t.Errorf("tor password from %s into %+v", tor.PasswordFrom, s.PasswordSecret)
	}
	if !droppedHas(tor.Dropped, "echoMode") || !droppedHas(tor.Dropped, "connectTime 5s") {
		t.Errorf("tor dropped = %v", tor.Dropped)
	}
	edge := peers["edge"]
	if es := edge.Peer.Spec; es.HoldTime.Duration != 90*time.Second || es.KeepaliveTime.Duration != 10*time.Second || es.PeerPort != 1179 || es.BFD != nil || edge.Password != "s3cret" {
		t.Errorf("edge (v1beta1) = %+v, password %q; want MetalLB's default hold 90s, BFD left out (multi-hop)", es, edge.Password)
	}
	if !droppedHas(edge.Dropped, "single-hop sessions only") {
		t.Errorf("edge dropped = %v", edge.Dropped)
	}
	if peers["red"].Peer != nil || !droppedHas(peers["red"].Dropped, "VRF red") {
		t.Errorf("red: %+v; want not converted because of its VRF", peers["red"])
	}
	if peers["dyn"].Peer != nil || !droppedHas(peers["dyn"].Dropped, "unnumbered on interface eth0") {
		t.Errorf("dyn: %+v; want not converted (unnumbered)", peers["dyn"])
	}
}

func TestConvertMetalLBServices(t *testing.T) {
	st := MetalLBState{Namespace: "metallb-system", Pools: []unstructured.Unstructured{
		mlb(t, "v1beta1", "IPAddressPool", "web", `{addresses: ["192.0.2.10-192.0.2.19"]}`),
		mlb(t, "v1beta1", "IPAddressPool", "team", `{addresses: ["198.51.100.0/28"], serviceAllocation: {namespaces: [team]}}`),
	}, NamespaceLabels: map[string]map[string]string{"team": {corev1.LabelMetadataName: "team"}, "shop": {corev1.LabelMetadataName: "shop"}},
		Services: []corev1.Service{
			lbService("shop", "a", 1, nil, "192.0.2.10"),
			lbService("shop", "outside", 2, nil, "203.0.113.9"),
			lbService("shop", "named", 3, map[string]string{"metallb.universe.tf/address-pool": "team"}, "192.0.2.11"),
			lbService("shop", "dns-udp", 5, map[string]string{"metallb.io/allow-shared-ip": "dns"}, "192.0.2.12"),
			lbService("shop", "dns-tcp", 4, map[string]string{"metallb.universe.tf/allow-shared-ip": "dns"}, "192.0.2.12"),
			lbService("shop", "clash", 6, nil, "192.0.2.10"),
			lbService("shop", "stranger", 7, nil, "198.51.100.3"),
			lbService("team", "t", 8, nil, "198.51.100.2"),
			lbService("shop", "pending", 9, nil),
			lbService("shop", "mapped", 10, nil, "::ffff:192.0.2.13"),
		}}
	p := ConvertMetalLB(st)
	want := map[string]struct {
		keeps bool
		note  string
	}{
		"shop/a":        {true, ""},
		"shop/outside":  {false, "in no converted pool"},
		"shop/named":    {false, "is not the pool the Service names (team)"},
		"shop/dns-tcp":  {true, ""},
		"shop/dns-udp":  {true, `shares 192.0.2.12 with shop/dns-tcp (allow-shared-ip "dns")`},
		"shop/clash":    {false, "shown by the older shop/a too"},
		"shop/stranger": {false, "does not admit its namespace"},
		"team/t":        {true, ""},
		"shop/mapped":   {true, ""}, // an IPv4-mapped address is its IPv4 address, as the operator adopts it
	}
	if len(p.Services) != len(want) {
		t.Errorf("%d Services planned, want %d (a Service without an address is not planned): %+v", len(p.Services), len(want), p.Services)
	}
	for _, f := range p.Services {
		w, ok := want[f.Service.String()]
		if !ok {
			t.Errorf("unexpected %s", f.Service)
			continue
		}
		if f.Service.Name == "mapped" && !slices.Equal(f.Addresses, []string{"192.0.2.13"}) {
			t.Errorf("%s: addresses %v, want 192.0.2.13", f.Service, f.Addresses)
		}
		if f.Keeps != w.keeps || !strings.Contains(f.Note, w.note) || (w.note == "" && f.Note != "") {
			t.Errorf("%s: keeps %v note %q; want %v, %q", f.Service, f.Keeps, f.Note, w.keeps, w.note)
		}
	}
}
