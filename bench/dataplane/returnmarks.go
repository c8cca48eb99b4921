package main

import (
	"flag"
	"fmt"
	"net/netip"
	"time"

	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
)

// withReturnMarks runs the Syncs of a node on two networks: the agent marks the connections
// to the VIPs arriving on its second interface (package returnpath) before its first Sync.
var withReturnMarks = flag.Bool("return-marks", true, "measure a node on two networks: the connections to the VIPs of one interface marked for the way back, as the agent does there")

// setReturnMarks marks the connections to the VIPs of services' family arriving on one
// interface, and prints what it took and the rules every packet now passes in mangle
// (they name the interface and the group's prefix, never a VIP: their count does not grow
// with n).
func setReturnMarks(dp dataplane.Plane, backend string, fam dataplane.Family, n int) error {
	if !*withReturnMarks {
		return nil
	}
	group := map[dataplane.Family]netip.Prefix{dataplane.IPv4: netip.MustParsePrefix("192.0.2.0/24"), dataplane.IPv6: netip.MustParsePrefix("2001:db8::/32")}[fam]
	marks := []dataplane.ReturnMark{{Interface: "eth1", Mark: 1 << 24, Mask: 0xf << 24, Destinations: []netip.Prefix{group}}}
	start := time.Now()
	if err := dp.SetReturnMarks(marks); err != nil {
		return fmt.Errorf("%s %s return marks: %w", backend, fam, err)
	}
	// A packet passes the jump, the marking rule of its interface's prefixes, the unmarked
	// connections' return and (marked) its interface's rule.
	fmt.Printf("%-8s %-4s n=%-6d %-22s %9.1f ms  (mangle VIPA-RETURN: 3 rules; a packet passes at most 4 with the jump, whatever n)\n",
		backend, fam, n, "SetReturnMarks", ms(time.Since(start)))
	return nil
}
