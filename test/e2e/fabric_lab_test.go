//go:build root && envtest

package e2e

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"

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
	// Since is when the session was established (Unix seconds): a reset
	// changes it.
	Since int64 `json:"bgpTimerUpEstablishedEpoch"`
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
