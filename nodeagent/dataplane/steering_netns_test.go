//go:build root

package dataplane

import (
	"encoding/binary"
	"fmt"
	"os"
	"strings"
	"testing"
)

// TestNFTablesSteering runs steering against the kernel in a namespace of its own: the
// ruleset, the policy routes to the peers, ICMP redirects off, and all of it gone again when
// the plane is told no peers.
func TestNFTablesSteering(t *testing.T) {
	enterNetns(t)
	cmd(t, "ip", "link", "add", "lan0", "type", "veth", "peer", "name", "lan1")
	cmd(t, "ip", "addr", "add", "203.0.113.11/24", "dev", "lan0")
	cmd(t, "ip", "link", "set", "lan0", "up")
	cmd(t, "ip", "link", "set", "lan1", "up")
	n, err := NewNFTables(Config{Family: IPv4})
	if err != nil {
		t.Fatal(err)
	}
	if err := n.SetSteering(threePeers); err != nil {
		t.Fatal(err)
	}
	if _, err := n.Sync([]Service{threeNodeWeb(true)}, false); err != nil {
		t.Fatal(err)
	}
	table := nftList(t, IPv4)
	for _, want := range []string{
		"type filter hook prerouting priority raw;",
		"meta mark set ip daddr . meta l4proto . th dport . jhash ip saddr . th sport mod 256 seed 0x76697061 map @steer_",
		"192.0.2.10 . tcp . 80 . 0x000000", // a bucket of the steer map
		": " + nftMark(1),                  // node2's mark
		": " + nftMark(2),                  // node3's mark
	} {
		if !strings.Contains(table, want) {
			t.Errorf("table lacks %q:\n%s", want, table)
		}
	}
	if strings.Contains(table, "masquerade 192.0.2.10") || strings.Contains(table, "198.51.100.2 . 8080") {
		t.Errorf("a steered port is masqueraded or DNATed to another node's endpoint:\n%s", table)
	}
	rules, routes := cmd(t, "ip", "rule"), cmd(t, "ip", "route", "show", "table", "5602")
	if !strings.Contains(rules, "30900:\tfrom all fwmark 0x1/0xff lookup 5601") || !strings.Contains(rules, "fwmark 0x2/0xff lookup 5602") ||
		!strings.Contains(routes, "default via 203.0.113.13 dev lan0") {
		t.Errorf("policy routes:\n%s\ntable 5602:\n%s", rules, routes)
	}
	for _, conf := range []string{"all", "lan0"} {
		if b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + conf + "/send_redirects"); err != nil || string(b) != "0\n" {
			t.Errorf("send_redirects of %s: %q %v", conf, b, err)
		}
	}
	if !n.Healthy() {
		// Healthy is false only until a successful Sync after SetSteering changed the marks.
		t.Error("not Healthy after the Sync")
	}

	// No peers: the routes go, and the next Sync rewrites the elements unsteered.
	if err := n.SetSteering(Steering{}); err != nil {
		t.Fatal(err)
	}
	if rules := cmd(t, "ip", "rule"); strings.Contains(rules, "fwmark 0x1/0xff") {
		t.Errorf("steering rules left:\n%s", rules)
	}
	if out := cmd(t, "ip", "route", "show", "table", "5601"); out != "" {
		t.Errorf("table 5601 left: %s", out)
	}
	if st, err := n.Sync([]Service{threeNodeWeb(true)}, false); err != nil || !st.Full {
		t.Fatalf("Sync after the peers changed: %+v %v, want a full one", st, err)
	}
	if table := nftList(t, IPv4); strings.Contains(table, ": "+nftMark(1)) || !strings.Contains(table, "198.51.100.2 . 8080") {
		t.Errorf("still steered without peers:\n%s", table)
	}
}

// nftMark is how nft lists a mark held as map data: the kernel reads it in host order, nft
// (told nothing of the data's byte order) prints the bytes as network order.
func nftMark(m uint32) string { return fmt.Sprintf("0x%08x", binary.BigEndian.Uint32(native32(m))) }
