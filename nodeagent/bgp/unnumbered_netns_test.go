package bgp

import (
	"fmt"
	"net/netip"
	"os"
	"os/exec"
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
	if os.Geteuid() != 0 {
		t.Fatal("needs root to create network namespaces (make test runs as root)")
	}
	nodeNS, leave, err := netnstest.Enter("vipa-bgp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = leave() })
	peer := fmt.Sprintf("vipa-bgpr-%d", os.Getpid())
	run := func(args ...string) {
		t.Helper()
		if out, err := exec.Command(args[0], args[1:]...).CombinedOutput(); err != nil {
			t.Fatalf("%v: %v: %s", args, err, out)
		}
	}
	run("ip", "netns", "add", peer)
	t.Cleanup(func() { _ = exec.Command("ip", "netns", "del", peer).Run() })
	for _, ns := range []string{"", peer} {
		args := []string{"sysctl", "-qw", "net.ipv6.conf.all.accept_dad=0", "net.ipv6.conf.default.accept_dad=0"}
		if ns != "" {
			args = append([]string{"ip", "netns", "exec", ns}, args...)
		}
		run(args...)
	}
	run("ip", "link", "add", "node0", "type", "veth", "peer", "name", "rtr0", "netns", peer)
	run("ip", "link", "set", "node0", "up")
	run("ip", "-n", peer, "link", "set", "rtr0", "up")
	linkLocal := func(ns, dev string) netip.Addr {
		deadline := time.Now().Add(10 * time.Second)
		for {
			out, _ := exec.Command("ip", "-n", ns, "-6", "-o", "addr", "show", "dev", dev, "scope", "link").Output()
			for _, f := range strings.Fields(string(out)) {
				if p, err := netip.ParsePrefix(f); err == nil {
					return p.Addr()
				}
			}
			if time.Now().After(deadline) {
				t.Fatalf("no link-local address on %s", dev)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	routerLL := linkLocal(peer, "rtr0")
	linkLocal(nodeNS, "node0")

	if _, err := routerOn("node0"); err == nil || !strings.Contains(err.Error(), "no router on node0 yet") {
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
		got, err := routerOn("node0")
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
