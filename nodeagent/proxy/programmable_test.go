package proxy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/trust"
)

// TestParseSourceRanges: spec.loadBalancerSourceRanges read as Kubernetes
// validates it; whatever is not a CIDR is reported, never dropped.
func TestParseSourceRanges(t *testing.T) {
	for _, tc := range []struct {
		in          []string
		want        []string
		wantInvalid []string
	}{
		{in: nil},
		{in: []string{"203.0.113.0/24", "2001:db8::/32"}, want: []string{"203.0.113.0/24", "2001:db8::/32"}},
		{in: []string{" 203.0.113.0/24 "}, want: []string{"203.0.113.0/24"}},                // the API server allows padding
		{in: []string{"203.0.113.7/24"}, want: []string{"203.0.113.0/24"}},                  // host bits masked
		{in: []string{"010.0.0.0/8"}, wantInvalid: []string{"010.0.0.0/8"}},                 // octal or decimal? nobody knows
		{in: []string{"1.2.3.4"}, wantInvalid: []string{"1.2.3.4"}},                         // no mask: no CIDR
		{in: []string{"fe80::1%eth0/64"}, wantInvalid: []string{"fe80::1%eth0/64"}},         // zones have no meaning here
		{in: []string{"fe80::1%eth0"}, wantInvalid: []string{"fe80::1%eth0"}},               //
		{in: []string{"::ffff:10.0.0.0/104"}, wantInvalid: []string{"::ffff:10.0.0.0/104"}}, // IPv4-mapped: which family?
		{in: []string{"10.0.0.0/33"}, wantInvalid: []string{"10.0.0.0/33"}},
		{in: []string{"203.0.113.0/24", ""}, want: []string{"203.0.113.0/24"}, wantInvalid: []string{""}},
	} {
		got, invalid := parseSourceRanges(tc.in)
		var gotS []string
		for _, p := range got {
			gotS = append(gotS, p.String())
		}
		if !slices.Equal(gotS, tc.want) || !slices.Equal(invalid, tc.wantInvalid) {
			t.Errorf("%q: got %v, invalid %q; want %v, invalid %q", tc.in, gotS, invalid, tc.want, tc.wantInvalid)
		}
	}
}

func addrSet(pairs ...string) map[netip.Addr]string {
	out := map[netip.Addr]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		out[netip.MustParseAddr(pairs[i])] = pairs[i+1]
	}
	return out
}

// TestProgrammable: which addresses of a Service this node carries, given the
// ledger, the Nodes' addresses and its own, and what it reports.
func TestProgrammable(t *testing.T) {
	const web, other = types.UID("uid-web"), types.UID("uid-other")
	view := trust.View{
		Holders: map[netip.Addr][]types.UID{
			netip.MustParseAddr("192.0.2.10"):  {web},
			netip.MustParseAddr("192.0.2.11"):  {other},
			netip.MustParseAddr("2001:db8::a"): {web},
			netip.MustParseAddr("192.0.2.251"): {web}, // the ledger gives it, the Node holds it
			netip.MustParseAddr("192.0.2.50"):  {web},
			netip.MustParseAddr("192.0.2.60"):  {web},
			netip.MustParseAddr("192.0.2.70"):  {web},
			netip.MustParseAddr("192.0.2.12"):  {other, web}, // shared: web is in spec.sharedWith
		},
		Reserved:   map[netip.Addr]string{netip.MustParseAddr("192.0.2.70"): "in the pod CIDR 192.0.2.64/26 of Node node2"},
		NodeAddrs:  addrSet("192.0.2.251", "node1", "2001:db8::251", "node1"),
		Local:      addrSet("192.0.2.50", "eth1", "192.0.2.60", "lo", "127.0.0.1", "lo"),
		Keepalived: map[netip.Addr]bool{netip.MustParseAddr("192.0.2.60"): true},
	}
	for _, tc := range []struct {
		desc         string
		ingress      []string
		ranges       []string
		wantVIPs     []string
		wantReasons  []string
		wantClosed   bool
		wantInDetail string
	}{
		{desc: "allocated by the operator: carried", ingress: []string{"192.0.2.10", "2001:db8::a"}, wantVIPs: []string{"192.0.2.10", "2001:db8::a"}},
		{desc: "forged status, no ledger object", ingress: []string{"192.0.2.99"}, wantReasons: []string{paasv1.ReasonNotInLedger}, wantInDetail: "IP object 192.0.2.99"},
		{desc: "forged status, the ledger names another Service", ingress: []string{"192.0.2.10", "192.0.2.11"}, wantVIPs: []string{"192.0.2.10"}, wantReasons: []string{paasv1.ReasonNotInLedger}},
		{desc: "a shared address whose ledger object lists the Service after its owner: carried", ingress: []string{"192.0.2.12"}, wantVIPs: []string{"192.0.2.12"}},
		{desc: "a Node's address, even when the ledger gives it", ingress: []string{"192.0.2.251"}, wantReasons: []string{paasv1.ReasonNodeAddress}, wantInDetail: "Node node1"},
		{desc: "a Node's IPv6 address, without a ledger object: the Node's reason first", ingress: []string{"2001:db8::251"}, wantReasons: []string{paasv1.ReasonNodeAddress}},
		{desc: "reserved since it was allocated (the operator's spec.reservedBy): held, not carried", ingress: []string{"192.0.2.10", "192.0.2.70"}, wantVIPs: []string{"192.0.2.10"}, wantReasons: []string{paasv1.ReasonReserved}, wantInDetail: "pod CIDR 192.0.2.64/26 of Node node2"},
		{desc: "an address of this node's interfaces", ingress: []string{"192.0.2.50"}, wantReasons: []string{paasv1.ReasonLocalAddress}, wantInDetail: "interface eth1"},
		{desc: "loopback of this node", ingress: []string{"127.0.0.1"}, wantReasons: []string{paasv1.ReasonLocalAddress}},
		{desc: "keepalived's address of a migrating VirtualIP is carried: the new path takes over before the old lets go", ingress: []string{"192.0.2.60"}, wantVIPs: []string{"192.0.2.60"}},
		{desc: "IPv4-mapped in the status reads as IPv4", ingress: []string{"::ffff:192.0.2.10"}, wantVIPs: []string{"192.0.2.10"}},
		{desc: "an address listed twice is carried once", ingress: []string{"192.0.2.10", "192.0.2.10"}, wantVIPs: []string{"192.0.2.10"}},
		{desc: "garbage and zones in the status are no addresses", ingress: []string{"nope", "fe80::1%eth0"}},
		{desc: "source ranges that do not parse: carried, closed, reported", ingress: []string{"192.0.2.10"}, ranges: []string{"203.0.113.0/24", "010.0.0.0/8"},
			wantVIPs: []string{"192.0.2.10"}, wantClosed: true, wantReasons: []string{paasv1.ReasonInvalidSourceRanges}, wantInDetail: `"010.0.0.0/8"`},
		{desc: "source ranges of a Service carrying nothing: nothing to report about them", ingress: []string{"192.0.2.99"}, ranges: []string{"nope"},
			wantReasons: []string{paasv1.ReasonNotInLedger}, wantClosed: true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			svc := lb(corev1.LoadBalancerIPModeProxy, nil, tc.ingress...)
			svc.UID = web
			svc.Spec.LoadBalancerSourceRanges = tc.ranges
			ds, report := programmable(dataplaneService(svc, Carried(svc, false, nil), nil, "node2"), svc, view)
			var vips, reasons []string
			for _, v := range ds.VIPs {
				vips = append(vips, v.String())
			}
			details := ""
			for _, r := range report.refusals {
				reasons = append(reasons, r.Reason)
				details += r.String() + "\n"
			}
			if !slices.Equal(vips, tc.wantVIPs) || !slices.Equal(reasons, tc.wantReasons) || ds.Closed != tc.wantClosed || !strings.Contains(details, tc.wantInDetail) {
				t.Fatalf("VIPs %v, closed %v, refusals %v:\n%s", vips, ds.Closed, reasons, details)
			}
		})
	}
}
