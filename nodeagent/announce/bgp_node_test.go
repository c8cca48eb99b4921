package announce

import (
	"errors"
	"net/netip"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func TestNodeIdentity(t *testing.T) {
	own := func() (map[netip.Addr]string, error) {
		return map[netip.Addr]string{netip.MustParseAddr("198.51.100.21"): "eth0", netip.MustParseAddr("2001:db8:1::21"): "eth0",
			netip.MustParseAddr("127.0.0.1"): "lo", netip.MustParseAddr("198.51.100.22"): "eth1"}, nil
	}
	peers := []paasv1.BGPPeer{
		{ObjectMeta: metav1.ObjectMeta{Name: "tor4"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "198.51.100.1", PeerASN: 64512, MyASN: 64513, RouterID: "192.0.2.9"}},
		{ObjectMeta: metav1.ObjectMeta{Name: "tor6"}, Spec: paasv1.BGPPeerSpec{PeerAddress: "2001:db8:1::1", PeerASN: 64512, MyASN: 64513}},
	}
	tests := []struct {
		desc        string
		annotations map[string]string
		own         func() (map[netip.Addr]string, error)
		// wantASN, wantRouter, wantSource4, wantSource6: what both sessions
		// peer as; wantInvalid: a text of why every peer is left out.
		wantASN                              uint32
		wantRouter, wantSource4, wantSource6 string
		wantInvalid                          string
	}{
		{desc: "no annotation: the BGPPeers' own", wantASN: 64513, wantRouter: "192.0.2.9"},
		{desc: "a rack's ASN on every session of the node", annotations: map[string]string{paasv1.NodeBGPASNAnnotation: "4200000001"},
			wantASN: 4200000001, wantRouter: "192.0.2.9"},
		{desc: "the node's router ID wins over the BGPPeer's", annotations: map[string]string{paasv1.NodeBGPRouterIDAnnotation: "192.0.2.77"},
			wantASN: 64513, wantRouter: "192.0.2.77"},
		{desc: "one source per family, each on the session of its family",
			annotations: map[string]string{paasv1.NodeBGPSourceAddressAnnotation: "2001:db8:1::21, 198.51.100.21"},
			wantASN:     64513, wantRouter: "192.0.2.9", wantSource4: "198.51.100.21", wantSource6: "2001:db8:1::21"},
		{desc: "only IPv4: the IPv6 session keeps the kernel's choice", annotations: map[string]string{paasv1.NodeBGPSourceAddressAnnotation: "198.51.100.22"},
			wantASN: 64513, wantRouter: "192.0.2.9", wantSource4: "198.51.100.22"},
		{desc: "ASN 0", annotations: map[string]string{paasv1.NodeBGPASNAnnotation: "0"}, wantInvalid: `vip.paas.org/bgp-asn="0": want an ASN`},
		{desc: "AS_TRANS", annotations: map[string]string{paasv1.NodeBGPASNAnnotation: "23456"}, wantInvalid: "not 23456"},
		{desc: "past 32 bits", annotations: map[string]string{paasv1.NodeBGPASNAnnotation: "4294967296"}, wantInvalid: "want an ASN"},
		{desc: "the reserved last ASN", annotations: map[string]string{paasv1.NodeBGPASNAnnotation: "4294967295"}, wantInvalid: "want an ASN"},
		{desc: "not a number", annotations: map[string]string{paasv1.NodeBGPASNAnnotation: "rack-a"}, wantInvalid: "want an ASN"},
		{desc: "an IPv6 router ID", annotations: map[string]string{paasv1.NodeBGPRouterIDAnnotation: "2001:db8::1"}, wantInvalid: "want an IPv4 unicast"},
		{desc: "router ID 0.0.0.0", annotations: map[string]string{paasv1.NodeBGPRouterIDAnnotation: "0.0.0.0"}, wantInvalid: "want an IPv4 unicast"},
		{desc: "a source address of another node", annotations: map[string]string{paasv1.NodeBGPSourceAddressAnnotation: "198.51.100.12"},
			wantInvalid: "198.51.100.12 is not an address of this node's interfaces"},
		{desc: "loopback", annotations: map[string]string{paasv1.NodeBGPSourceAddressAnnotation: "127.0.0.1"}, wantInvalid: "not a unicast address"},
		{desc: "two of one family", annotations: map[string]string{paasv1.NodeBGPSourceAddressAnnotation: "198.51.100.21,198.51.100.22"},
			wantInvalid: "at most one address per family"},
		{desc: "not an address", annotations: map[string]string{paasv1.NodeBGPSourceAddressAnnotation: "eth0"}, wantInvalid: `"eth0" is not an IP address`},
		{desc: "addresses unreadable", annotations: map[string]string{paasv1.NodeBGPSourceAddressAnnotation: "198.51.100.21"},
			own: func() (map[netip.Addr]string, error) { return nil, errors.New("netlink down") }, wantInvalid: "netlink down"},
		{desc: "one bad value spoils all: no half-used identity",
			annotations: map[string]string{paasv1.NodeBGPASNAnnotation: "64601", paasv1.NodeBGPRouterIDAnnotation: "bad"}, wantInvalid: "bgp-router-id"},
	}
	for _, tt := range tests {
		t.Run(tt.desc, func(t *testing.T) {
			node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Annotations: tt.annotations},
				Status: corev1.NodeStatus{Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "198.51.100.11"}}}}
			read := own
			if tt.own != nil {
				read = tt.own
			}
			cfg, skipped := bgpPeersOf(node, peers, nil, nodeIdentityOf(node, read))
			if tt.wantInvalid != "" {
				if len(cfg.Peers) != 0 || len(skipped) != 2 || !strings.Contains(skipped["tor4"], tt.wantInvalid) || skipped["tor4"] != skipped["tor6"] {
					t.Fatalf("peers %+v, skipped %v: want both left out, saying %q", cfg.Peers, skipped, tt.wantInvalid)
				}
				return
			}
			if len(cfg.Peers) != 2 || len(skipped) != 0 {
				t.Fatalf("peers %+v, skipped %v: want both", cfg.Peers, skipped)
			}
			if cfg.RouterID.String() != tt.wantRouter {
				t.Errorf("router ID %s, want %s", cfg.RouterID, tt.wantRouter)
			}
			for i, want := range []string{tt.wantSource4, tt.wantSource6} {
				p := cfg.Peers[i]
				if p.MyASN != tt.wantASN {
					t.Errorf("%s: ASN %d, want %d", p.Name, p.MyASN, tt.wantASN)
				}
				if got := p.Source.String(); want == "" && p.Source.IsValid() || want != "" && got != want {
					t.Errorf("%s: source %s, want %q", p.Name, p.Source, want)
				}
			}
		})
	}
}
