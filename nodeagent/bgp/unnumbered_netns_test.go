//go:build root

package bgp

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	"github.com/mdlayher/ndp"

	"github.com/paas-org/vip-allocator-operator/internal/netnstest"
)

// TestLinkDiscovery: on a veth link between two throwaway namespaces, the
// node finds no router until the other end advertises itself, then exactly
// that end's link-local address, zoned to the link; and what the node
// advertises is a Router Advertisement no host takes it for a router by:
// lifetime 0, hop limit and timers unspecified, no prefix, its own MAC.
func TestLinkDiscovery(t *testing.T) {
	netnstest.EnterTest(t, "vipa-bgp")
	peer := netnstest.AddPeer(t, "vipa-bgpr")
	netnstest.NoDAD(t, "")
	netnstest.NoDAD(t, peer)
	netnstest.Veth(t, "node0", peer, "rtr0")
	routerLL := netnstest.LinkLocal(t, peer, "rtr0")
	netnstest.LinkLocal(t, "", "node0")

	if _, _, err := routerOn("node0", netip.Addr{}); err == nil || !strings.Contains(err.Error(), "no router on node0 yet") {
		t.Fatalf("before any advertisement: %v, want no router yet", err)
	}
	listener, err := listenLink("node0")
	if err != nil {
		t.Fatal(err)
	}
	defer listener.Close()
	// The other end advertises itself as the node would.
	if err := netnstest.Do(peer, func() error {
		conn, err := listenLink("rtr0")
		if err != nil {
			return err
		}
		defer conn.Close()
		return sendAdvertisement(conn, "rtr0")
	}); err != nil {
		t.Fatal(err)
	}
	if err := listener.SetReadDeadline(time.Now().Add(5 * time.Second)); err != nil {
		t.Fatal(err)
	}
	for {
		msg, _, from, err := listener.ReadFrom()
		if err != nil {
			t.Fatalf("no Router Advertisement arrived: %v", err)
		}
		ra, ok := msg.(*ndp.RouterAdvertisement)
		if !ok {
			continue
		}
		if from.WithZone("") != routerLL {
			t.Fatalf("advertisement from %s, want %s", from, routerLL)
		}
		if ra.RouterLifetime != 0 || ra.CurrentHopLimit != 0 || ra.ReachableTime != 0 || ra.RetransmitTimer != 0 || len(ra.Options) != 1 {
			t.Fatalf("advertisement %+v: want lifetime, hop limit and timers 0 and one option (its MAC)", ra)
		}
		if lla, ok := ra.Options[0].(*ndp.LinkLayerAddress); !ok || lla.Direction != ndp.Source || len(lla.Addr) != 6 {
			t.Fatalf("option %+v: want the source link-layer address", ra.Options[0])
		}
		break
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		got, _, err := routerOn("node0", netip.Addr{})
		if err == nil {
			if got != routerLL.WithZone("node0") {
				t.Fatalf("router %s, want %s%%node0", got, routerLL)
			}
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after the advertisement: %v", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
