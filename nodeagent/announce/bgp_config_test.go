package announce

import (
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
)

func TestBGPPeersOf(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{"rack": "a"}},
		Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{
			{Type: corev1.NodeInternalIP, Address: "2001:db8::11"}, {Type: corev1.NodeInternalIP, Address: "198.51.100.11"}}}}
	peer := func(name string, mutate func(*paasv1.BGPPeerSpec)) paasv1.BGPPeer {
		p := paasv1.BGPPeer{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513}}
		if mutate != nil {
			mutate(&p.Spec)
		}
		return p
	}
	rack := func(r string) *metav1.LabelSelector {
		return &metav1.LabelSelector{MatchLabels: map[string]string{"rack": r}}
	}
	aged := func(p paasv1.BGPPeer, minutes int) paasv1.BGPPeer {
		p.CreationTimestamp = metav1.NewTime(time.Date(2026, 1, 1, 0, minutes, 0, 0, time.UTC))
		return p
	}
	tests := []struct {
		desc        string
		peers       []paasv1.BGPPeer
		passwords   map[string]string
		wantPeers   []string
		wantRouter  string
		wantSkipped []string
	}{
		{"no peer", nil, nil, nil, "198.51.100.11", nil},
		{"defaults: port 179, hold 3s, keepalive 1s; router ID the IPv4 InternalIP", []paasv1.BGPPeer{peer("tor", nil)}, nil, []string{"tor"}, "198.51.100.11", nil},
		{"node selectors pick the peers", []paasv1.BGPPeer{
			peer("tor-b", func(s *paasv1.BGPPeerSpec) { s.NodeSelector = rack("b") }),
			peer("tor-a", func(s *paasv1.BGPPeerSpec) { s.NodeSelector = rack("a") })}, nil, []string{"tor-a"}, "198.51.100.11", nil},
		{"a router ID override wins", []paasv1.BGPPeer{peer("tor", func(s *paasv1.BGPPeerSpec) { s.RouterID = "192.0.2.1" })}, nil, []string{"tor"}, "192.0.2.1", nil},
		{"a peer whose password is not there yet waits", []paasv1.BGPPeer{
			peer("tor", func(s *paasv1.BGPPeerSpec) { s.PasswordSecret = &paasv1.SecretKeyRef{Name: "s", Key: "k"} })}, nil, nil, "198.51.100.11", []string{"tor"}},
		{"with its password it peers", []paasv1.BGPPeer{
			peer("tor", func(s *paasv1.BGPPeerSpec) { s.PasswordSecret = &paasv1.SecretKeyRef{Name: "s", Key: "k"} })}, map[string]string{"tor": "pw"}, []string{"tor"}, "198.51.100.11", nil},
		{"two peers with one address: the older wins, the other is left out", []paasv1.BGPPeer{
			aged(peer("tor-a", nil), 2), aged(peer("tor-z", nil), 1), aged(peer("other", func(s *paasv1.BGPPeerSpec) { s.PeerAddress = "198.51.100.2" }), 3)},
			nil, []string{"other", "tor-z"}, "198.51.100.11", []string{"tor-a"}},
		{"unnumbered: one session per interface, as per address", []paasv1.BGPPeer{
			aged(peer("swp1-b", func(s *paasv1.BGPPeerSpec) { s.PeerAddress, s.Interface = "", "swp1" }), 2),
			aged(peer("swp1-a", func(s *paasv1.BGPPeerSpec) { s.PeerAddress, s.Interface = "", "swp1" }), 1),
			aged(peer("tor", nil), 3)},
			nil, []string{"swp1-a", "tor"}, "198.51.100.11", []string{"swp1-b"}},
		{"as old: the first by name wins", []paasv1.BGPPeer{aged(peer("tor-b", nil), 1), aged(peer("tor-a", nil), 1)},
			nil, []string{"tor-a"}, "198.51.100.11", []string{"tor-b"}},
		{"an IPv4-mapped IPv6 address is the same address", []paasv1.BGPPeer{
			aged(peer("mapped", func(s *paasv1.BGPPeerSpec) { s.PeerAddress = "::ffff:198.51.100.1" }), 2), aged(peer("tor", nil), 1)},
			nil, []string{"tor"}, "198.51.100.11", []string{"mapped"}},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			cfg, skipped := bgpPeersOf(node, tt.peers, tt.passwords, nodeIdentity{})
			var names []string
			for _, p := range cfg.Peers {
				names = append(names, p.Name)
			}
			if !slices.Equal(names, tt.wantPeers) {
				t.Errorf("peers %v, want %v", names, tt.wantPeers)
			}
			if cfg.RouterID.String() != tt.wantRouter {
				t.Errorf("router ID %s, want %s", cfg.RouterID, tt.wantRouter)
			}
			var gotSkipped []string
			for name := range skipped {
				gotSkipped = append(gotSkipped, name)
			}
			if !slices.Equal(gotSkipped, tt.wantSkipped) {
				t.Errorf("skipped %v, want %v", skipped, tt.wantSkipped)
			}
		})
	}
	cfg, _ := bgpPeersOf(node, []paasv1.BGPPeer{peer("tor", func(s *paasv1.BGPPeerSpec) {
		s.PeerPort, s.HoldTime, s.KeepaliveTime, s.EBGPMultiHop = 1179, &metav1.Duration{Duration: 9 * time.Second}, &metav1.Duration{Duration: 3 * time.Second}, ptr.To(true)
		s.PasswordSecret = &paasv1.SecretKeyRef{Name: "s", Key: "k"}
		s.GracefulRestart = ptr.To(true)
	})}, map[string]string{"tor": "pw"}, nodeIdentity{})
	want := bgp.Peer{Name: "tor", Address: netip.MustParseAddr("198.51.100.1"), Port: 1179, PeerASN: 64512, MyASN: 64513,
		Hold: 9 * time.Second, Keepalive: 3 * time.Second, Password: "pw", MultiHop: true, GracefulRestart: true}
	if len(cfg.Peers) != 1 || cfg.Peers[0] != want {
		t.Errorf("peer %+v, want %+v", cfg.Peers, want)
	}
	bfdTests := []struct {
		desc string
		bfd  *paasv1.BFDSettings
		want bgp.BFD
	}{
		{"absent: no BFD", nil, bgp.BFD{}},
		{"empty: the defaults, 300 ms x 3", &paasv1.BFDSettings{}, bgp.BFD{Receive: 300 * time.Millisecond, Transmit: 300 * time.Millisecond, Multiplier: 3}},
		{"set", &paasv1.BFDSettings{ReceiveInterval: ptr.To[int32](50), TransmitInterval: ptr.To[int32](100), DetectMultiplier: ptr.To[int32](5)},
			bgp.BFD{Receive: 50 * time.Millisecond, Transmit: 100 * time.Millisecond, Multiplier: 5}},
		{"a multiplier out of range falls back to 3", &paasv1.BFDSettings{DetectMultiplier: ptr.To[int32](1000)},
			bgp.BFD{Receive: 300 * time.Millisecond, Transmit: 300 * time.Millisecond, Multiplier: 3}},
	}
	for _, tt := range bfdTests {
		cfg, _ := bgpPeersOf(node, []paasv1.BGPPeer{peer("tor", func(s *paasv1.BGPPeerSpec) { s.BFD = tt.bfd })}, nil, nodeIdentity{})
		if len(cfg.Peers) != 1 || cfg.Peers[0].BFD != tt.want {
			t.Errorf("%s: BFD %+v, want %+v", tt.desc, cfg.Peers, tt.want)
		}
	}
}

func TestRouteOf(t *testing.T) {
	group := &paasv1.IPGroup{Spec: paasv1.IPGroupSpec{Announce: &paasv1.Announce{Mode: paasv1.AnnounceBGP, BGP: &paasv1.BGPAnnounce{
		Peers: []string{"tor-b", "tor-a"}, Communities: []string{"65000:100", "65000:1:2", "0:0"}, LocalPref: ptr.To[uint32](150)}}}}
	r := routeOf(netip.MustParseAddr("203.0.113.5"), group, false)
	if r.Prefix != netip.MustParsePrefix("203.0.113.5/32") || r.LocalPref != 150 || !slices.Equal(r.Peers, []string{"tor-a", "tor-b"}) ||
		!slices.Equal(r.Communities, []uint32{65000<<16 | 100, 0}) || !slices.Equal(r.LargeCommunities, [][3]uint32{{65000, 1, 2}}) {
		t.Errorf("route %+v", r)
	}
	if r := routeOf(netip.MustParseAddr("2001:db8::5"), &paasv1.IPGroup{}, false); r.Prefix.Bits() != 128 || r.Peers != nil || r.Communities != nil {
		t.Errorf("plain IPv6 route %+v: want a /128 to every peer, no attributes", r)
	}
}

func TestParseCommunity(t *testing.T) {
	tests := []struct {
		in      string
		std     uint32
		large   [3]uint32
		isLarge bool
		err     bool
	}{
		{"65000:100", 65000<<16 | 100, [3]uint32{}, false, false},
		{"65535:65535", 0xffffffff, [3]uint32{}, false, false},
		{"65536:1", 0, [3]uint32{}, false, true},
		{"4200000000:1:2", 0, [3]uint32{4200000000, 1, 2}, true, false},
		{"1:2:4294967296", 0, [3]uint32{}, false, true},
		{"no-export", 0, [3]uint32{}, false, true},
		{"1:2:3:4", 0, [3]uint32{}, false, true},
	}
	for _, tt := range tests {
		std, large, isLarge, err := ParseCommunity(tt.in)
		if (err != nil) != tt.err || (!tt.err && (std != tt.std || large != tt.large || isLarge != tt.isLarge)) {
			t.Errorf("ParseCommunity(%q) = %d, %v, %v, %v", tt.in, std, large, isLarge, err)
		}
	}
}

func TestEstablishedNodes(t *testing.T) {
	peers := []paasv1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "tor-a"}, Status: paasv1.BGPPeerStatus{Sessions: []paasv1.BGPSession{{Node: "n1", State: "Established"}, {Node: "n2", State: "Active"}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tor-b"}, Status: paasv1.BGPPeerStatus{Sessions: []paasv1.BGPSession{{Node: "n2", State: "Established"}}}},
	}
	if got := establishedNodes(peers, nil); !got["n1"] || !got["n2"] || len(got) != 2 {
		t.Errorf("any peer: %v", got)
	}
	if got := establishedNodes(peers, []string{"tor-a"}); !got["n1"] || got["n2"] {
		t.Errorf("tor-a only: %v", got)
	}
}

// TestWithOwnSessions: this node's session entries count only where its
// speaker has the session in the same state (a previous run's Established
// does not; a live one not on the status yet does not either); the other
// nodes' stay as written.
func TestWithOwnSessions(t *testing.T) {
	peers := []paasv1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "r1"}, Status: paasv1.BGPPeerStatus{Sessions: []paasv1.BGPSession{
			{Node: "a", State: paasv1.SessionEstablished}, {Node: "b", State: paasv1.SessionEstablished}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "r2"}, Status: paasv1.BGPPeerStatus{Sessions: []paasv1.BGPSession{
			{Node: "a", State: paasv1.SessionEstablished}}}},
		{ObjectMeta: metav1.ObjectMeta{Name: "r3"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "r4"}, Status: paasv1.BGPPeerStatus{Sessions: []paasv1.BGPSession{
			{Node: "a", State: paasv1.SessionEstablished}}}},
	}
	live := []bgp.Session{{Peer: "r1", State: "Active"}, {Peer: "r3", State: paasv1.SessionEstablished}, {Peer: "r4", State: paasv1.SessionEstablished}}
	got := withOwnSessions(peers, "a", live)
	for _, tc := range []struct {
		peers []string
		a     bool
	}{{[]string{"r1"}, false}, {[]string{"r2"}, false}, {[]string{"r3"}, false}, {[]string{"r4"}, true}} {
		if up := establishedNodes(got, tc.peers); up["a"] != tc.a {
			t.Errorf("a established toward %v: %v, want %v (status and speaker agree only on r4)", tc.peers, up["a"], tc.a)
		}
	}
	if up := establishedNodes(got, []string{"r1"}); !up["b"] {
		t.Errorf("b's own entry on r1 dropped: %+v", got[0].Status.Sessions)
	}
	if peers[0].Status.Sessions[0].State != paasv1.SessionEstablished || len(peers[0].Status.Sessions) != 2 {
		t.Errorf("the observed peers were changed: %+v", peers[0].Status.Sessions)
	}
}
