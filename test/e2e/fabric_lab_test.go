//go:build root && envtest

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// frrFabricConfig is a leaf router as a leaf-spine fabric configures it, and
// as docs/announcement.md shows it: it names no node (a listen range, any
// ASN but its own: each rack has its own), BFD through the profile vipa
// (bfddConfig), ECMP across the racks' different AS paths, routes accepted
// only inside the VIP range and none sent to the nodes (they import nothing).
func frrFabricConfig(routerID string) string {
	return `hostname router
ip prefix-list vips seq 10 permit 203.0.113.128/25 le 32
route-map vips-in permit 10
 match ip address prefix-list vips
exit
route-map nothing-out deny 10
exit
router bgp 64512
 bgp router-id ` + routerID + `
 bgp bestpath as-path multipath-relax
 no bgp default ipv4-unicast
 neighbor fabric peer-group
 neighbor fabric remote-as external
 neighbor fabric timers 1 3
 neighbor fabric bfd profile vipa
 bgp listen range 198.51.100.0/24 peer-group fabric
 address-family ipv4 unicast
  neighbor fabric activate
  neighbor fabric route-map vips-in in
  neighbor fabric route-map nothing-out out
  maximum-paths 8
 exit-address-family
`
}

// setupFabric is the BGP lab with frrFabricConfig's router (bgpd and bfdd).
func setupFabric(t testing.TB) *bgpLab {
	return setupBGPRouter(t, func(l *lab) *frr {
		return startFRRWithBFD(t, l, "router", frrFabricConfig("198.51.100.1"), bfddConfig)
	})
}

// annotate sets (or, with "", removes) annotations of node as its
// administrator would.
func (d *dataLab) annotate(t testing.TB, node string, kv ...string) {
	t.Helper()
	var n corev1.Node
	if err := d.env.Admin.Get(context.Background(), client.ObjectKey{Name: node}, &n); err != nil {
		t.Fatal(err)
	}
	patch := client.MergeFrom(n.DeepCopy())
	if n.Annotations == nil {
		n.Annotations = map[string]string{}
	}
	for i := 0; i+1 < len(kv); i += 2 {
		if kv[i+1] == "" {
			delete(n.Annotations, kv[i])
		} else {
			n.Annotations[kv[i]] = kv[i+1]
		}
	}
	if err := d.env.Admin.Patch(context.Background(), &n, patch); err != nil {
		t.Fatal(err)
	}
}

// pathsBy maps each next hop of prefix's installed paths to its AS path.
func (r *frr) pathsBy(prefix string) (map[string]string, error) {
	paths, err := r.paths(prefix)
	if err != nil {
		return nil, err
	}
	out := map[string]string{}
	for _, p := range paths {
		if !p.installed() {
			continue
		}
		as := ""
		if p.ASPath != nil {
			as = p.ASPath.String
		}
		for _, nh := range p.Nexthops {
			out[nh.IP] = as
		}
	}
	return out, nil
}

// neighbor is what the router says of one (dynamic) neighbour.
type neighbor struct {
	RemoteAs       int64  `json:"remoteAs"`
	RemoteRouterID string `json:"remoteRouterId"`
	State          string `json:"bgpState"`
	sessionAge
}

// sessionAge is what tells one established session of a neighbour from the
// next, in FRR's own terms: how long it has been up, in whole seconds of
// FRR's monotonic clock, and how many sessions with the neighbour came up and
// went down. A dynamic neighbour is deleted when its session drops and
// created anew, counters at zero, so only the uptime shows its resets.
type sessionAge struct {
	UpMsec      int64 `json:"bgpTimerUpMsec"`
	Established int64 `json:"connectionsEstablished"`
	Dropped     int64 `json:"connectionsDropped"`
}

// kept says why the session read as after, elapsed (the test's monotonic
// clock between the end of the first reading and the start of the second)
// after before, is not the same session, or nil if it is: still
// established, no session came or went, and its uptime grew with the clock
// (FRR's whole seconds lose under 1 s).
func (after neighbor) kept(before neighbor, elapsed time.Duration) error {
	up := time.Duration(after.UpMsec-before.UpMsec) * time.Millisecond
	switch {
	case before.State != "Established" || after.State != "Established":
		return fmt.Errorf("state %s, then %s", before.State, after.State)
	case after.Established != before.Established || after.Dropped != before.Dropped:
		return fmt.Errorf("sessions established %d, dropped %d, then established %d, dropped %d",
			before.Established, before.Dropped, after.Established, after.Dropped)
	case up < elapsed-time.Second:
		return fmt.Errorf("up %s, then %s, %s later: it started over",
			time.Duration(before.UpMsec)*time.Millisecond, time.Duration(after.UpMsec)*time.Millisecond, elapsed.Round(time.Millisecond))
	}
	return nil
}

// neighbors are the router's neighbours by address.
func (r *frr) neighbors() (map[string]neighbor, error) {
	out, err := r.vtysh("show bgp neighbors json")
	if err != nil {
		return nil, err
	}
	var doc map[string]neighbor
	if err := json.Unmarshal([]byte(out), &doc); err != nil {
		return nil, fmt.Errorf("parse %q: %w", out, err)
	}
	return doc, nil
}

// TestSessionKept: kept tells FRR's readings of one session from those of a
// session reset in between, as FRR reports them: a static neighbour counts
// the reset; a dynamic one is created anew, counters at 1 and 0 again, and
// only its uptime, in whole seconds, shows it.
func TestSessionKept(t *testing.T) {
	up := func(seconds, established, dropped int64) neighbor {
		return neighbor{State: "Established", sessionAge: sessionAge{UpMsec: seconds * 1000, Established: established, Dropped: dropped}}
	}
	for _, tc := range []struct {
		desc          string
		before, after neighbor
		elapsed       time.Duration
		kept          bool
	}{
		{"kept: FRR's whole seconds fall behind the clock", up(8, 1, 0), up(13, 1, 0), 5900 * time.Millisecond, true},
		{"kept: read twice within a second", up(8, 1, 0), up(8, 1, 0), 900 * time.Millisecond, true},
		{"kept: FRR's second turned between two close readings", up(8, 1, 0), up(9, 1, 0), 100 * time.Millisecond, true},
		{"a dynamic neighbour created anew", up(14, 1, 0), up(3, 1, 0), 19 * time.Second, false},
		{"a dynamic neighbour created anew, up longer than the first was", up(5, 1, 0), up(7, 1, 0), 20 * time.Second, false},
		{"a static neighbour's reset", up(14, 1, 0), up(30, 2, 1), 19 * time.Second, false},
		{"down", up(14, 1, 0), neighbor{State: "Active"}, time.Second, false},
	} {
		if err := tc.after.kept(tc.before, tc.elapsed); (err == nil) != tc.kept {
			t.Errorf("%s: kept = %v, want kept %v", tc.desc, err, tc.kept)
		}
	}
}
