package proxy

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/changes"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
	"github.com/paas-org/vip-allocator-operator/nodeagent/trust"
)

func nn(s string) types.NamespacedName {
	ns, name, _ := strings.Cut(s, "/")
	return types.NamespacedName{Namespace: ns, Name: name}
}

func keyStrings(keys []types.NamespacedName) []string {
	out := make([]string, 0, len(keys))
	for _, k := range keys {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

// dsvc is a derivation of Service key, served with vips (none: not served), naming addrs in
// its status (vips when nil).
func dsvc(key string, vips []string, refused bool, onLocal bool) *derived {
	k := nn(key)
	d := &derived{ds: dataplane.Service{Namespace: k.Namespace, Name: k.Name}, onLocal: onLocal,
		report: serviceReport{svc: &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}}}
	for _, v := range vips {
		a := netip.MustParseAddr(v)
		d.addrs = append(d.addrs, a)
		if !refused {
			d.ds.VIPs = append(d.ds.VIPs, a)
		}
	}
	d.served = len(d.ds.VIPs) > 0
	if refused {
		d.report.refusals = []trust.Refusal{{Reason: paasv1.ReasonNotInLedger, Detail: "x"}}
	}
	return d
}

type setOp struct {
	key string
	d   *derived // nil: the Service is gone
}

// TestDesiredState: the served slice, the address index, and the refused and local sets
// follow each derivation, whatever order Services come and go in.
func TestDesiredState(t *testing.T) {
	for _, tc := range []struct {
		name        string
		ops         []setOp
		wantServed  []string
		wantFam     map[dataplane.Family]int
		stale       changes.Set
		wantStale   []string
		wantReports []string // for reports(stale keys)
	}{
		{
			name:       "Services come in",
			ops:        []setOp{{"a/web", dsvc("a/web", []string{"192.0.2.1"}, false, false)}, {"a/db", dsvc("a/db", []string{"2001:db8::1"}, false, false)}},
			wantServed: []string{"a/db", "a/web"}, wantFam: map[dataplane.Family]int{dataplane.IPv4: 1, dataplane.IPv6: 1},
		},
		{
			name: "a Service derived again replaces itself in place",
			ops: []setOp{{"a/web", dsvc("a/web", []string{"192.0.2.1"}, false, false)},
				{"a/web", dsvc("a/web", []string{"2001:db8::1"}, false, false)}},
			wantServed: []string{"a/web"}, wantFam: map[dataplane.Family]int{dataplane.IPv4: 0, dataplane.IPv6: 1},
		},
		{
			name: "a gone Service in the middle: the last one takes its place",
			ops: []setOp{{"a/1", dsvc("a/1", []string{"192.0.2.1"}, false, false)}, {"a/2", dsvc("a/2", []string{"192.0.2.2"}, false, false)},
				{"a/3", dsvc("a/3", []string{"192.0.2.3"}, false, false)}, {"a/1", nil}, {"a/3", dsvc("a/3", []string{"192.0.2.4"}, false, false)}},
			wantServed: []string{"a/2", "a/3"}, wantFam: map[dataplane.Family]int{dataplane.IPv4: 2},
		},
		{
			name: "a Service no longer served leaves the slice but stays indexed",
			ops: []setOp{{"a/web", dsvc("a/web", []string{"192.0.2.1"}, false, false)},
				{"a/web", dsvc("a/web", []string{"192.0.2.1"}, true, false)}},
			wantServed: nil, wantFam: map[dataplane.Family]int{dataplane.IPv4: 0},
			// The ledger object of its refused address changes: it is stale.
			stale:     changes.Set{Addrs: map[netip.Addr]bool{netip.MustParseAddr("192.0.2.1"): true}},
			wantStale: []string{"a/web"}, wantReports: []string{"a/web"},
		},
		{
			name: "an address event reaches every Service naming it, and only those",
			ops: []setOp{{"a/1", dsvc("a/1", []string{"192.0.2.1"}, false, false)}, {"b/2", dsvc("b/2", []string{"192.0.2.1", "192.0.2.2"}, false, false)},
				{"c/3", dsvc("c/3", []string{"192.0.2.3"}, false, false)}},
			wantServed: []string{"a/1", "b/2", "c/3"}, wantFam: map[dataplane.Family]int{dataplane.IPv4: 3},
			stale:     changes.Set{Addrs: map[netip.Addr]bool{netip.MustParseAddr("192.0.2.1"): true}, Services: map[types.NamespacedName]bool{nn("c/3"): true}},
			wantStale: []string{"a/1", "b/2", "c/3"}, wantReports: []string{"a/1", "b/2", "c/3"},
		},
		{
			name:       "a Service that no longer names an address is no longer reached by it",
			ops:        []setOp{{"a/1", dsvc("a/1", []string{"192.0.2.1"}, false, false)}, {"a/1", dsvc("a/1", []string{"192.0.2.9"}, false, false)}},
			wantServed: []string{"a/1"}, wantFam: map[dataplane.Family]int{dataplane.IPv4: 1},
			stale:     changes.Set{Addrs: map[netip.Addr]bool{netip.MustParseAddr("192.0.2.1"): true}},
			wantStale: nil, wantReports: nil,
		},
		{
			name: "a refused Service is reported at every sync, a Service with a VIP on this node derived at every sync",
			ops: []setOp{{"a/refused", dsvc("a/refused", []string{"192.0.2.1"}, true, false)}, {"a/local", dsvc("a/local", []string{"192.0.2.2"}, false, true)},
				{"a/plain", dsvc("a/plain", []string{"192.0.2.3"}, false, false)}},
			wantServed: []string{"a/local", "a/plain"}, wantFam: map[dataplane.Family]int{dataplane.IPv4: 2},
			stale:     changes.Set{},
			wantStale: []string{"a/local"}, wantReports: []string{"a/local", "a/refused"},
		},
		{
			name:       "a gone Service leaves the refused and local sets and the index",
			ops:        []setOp{{"a/refused", dsvc("a/refused", []string{"192.0.2.1"}, true, true)}, {"a/refused", nil}},
			wantServed: nil, wantFam: map[dataplane.Family]int{},
			stale:     changes.Set{Addrs: map[netip.Addr]bool{netip.MustParseAddr("192.0.2.1"): true}},
			wantStale: nil, wantReports: nil,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := newDesiredState()
			for _, op := range tc.ops {
				s.set(nn(op.key), op.d)
			}
			var served []string
			for i, ds := range s.served {
				k := types.NamespacedName{Namespace: ds.Namespace, Name: ds.Name}
				served = append(served, k.String())
				if s.at[k] != i {
					t.Fatalf("at[%s] = %d, but it is at %d", k, s.at[k], i)
				}
			}
			slices.Sort(served)
			if !slices.Equal(served, tc.wantServed) {
				t.Fatalf("served = %v, want %v", served, tc.wantServed)
			}
			if len(s.at) != len(s.served) {
				t.Fatalf("%d indexes for %d served", len(s.at), len(s.served))
			}
			for fam, n := range tc.wantFam {
				if s.families[fam] != n {
					t.Fatalf("families[%s] = %d, want %d", fam, s.families[fam], n)
				}
			}
			keys := s.staleKeys(tc.stale)
			if got := keyStrings(keys); !slices.Equal(got, tc.wantStale) && len(got)+len(tc.wantStale) > 0 {
				t.Fatalf("staleKeys = %v, want %v", got, tc.wantStale)
			}
			var reported []string
			for _, r := range s.reports(keys) {
				reported = append(reported, r.svc.Namespace+"/"+r.svc.Name)
			}
			slices.Sort(reported)
			if !slices.Equal(reported, tc.wantReports) && len(reported)+len(tc.wantReports) > 0 {
				t.Fatalf("reports = %v, want %v", reported, tc.wantReports)
			}
		})
	}
}

// TestDesiredStateServedValues: the slice holds each Service's latest derivation.
func TestDesiredStateServedValues(t *testing.T) {
	s := newDesiredState()
	s.set(nn("a/1"), dsvc("a/1", []string{"192.0.2.1"}, false, false))
	s.set(nn("a/2"), dsvc("a/2", []string{"192.0.2.2"}, false, false))
	s.set(nn("a/1"), nil)
	s.set(nn("a/2"), dsvc("a/2", []string{"192.0.2.7"}, false, false))
	if len(s.served) != 1 || s.served[0].Name != "2" || s.served[0].VIPs[0] != netip.MustParseAddr("192.0.2.7") {
		t.Fatalf("served = %+v, want a/2 with 192.0.2.7 only", s.served)
	}
}

func TestDesiredStateAwaitingCarried(t *testing.T) {
	a, b := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2")
	web, api := types.NamespacedName{Namespace: "ns", Name: "web"}, types.NamespacedName{Namespace: "ns", Name: "api"}
	s := newDesiredState()
	steps := []struct {
		desc string
		key  types.NamespacedName
		d    *derived
		want []netip.Addr
	}{
		{"web carries a, awaiting the data path", web, &derived{served: true, ds: dataplane.Service{Namespace: "ns", Name: "web", VIPs: []netip.Addr{a}}, awaiting: []netip.Addr{a}}, []netip.Addr{a}},
		{"api shares a and carries b, handed over already", api, &derived{served: true, ds: dataplane.Service{Namespace: "ns", Name: "api", VIPs: []netip.Addr{a, b}}, awaiting: []netip.Addr{a}}, []netip.Addr{a}},
		{"web is refused a: not carried, nothing to report for it", web, &derived{awaiting: []netip.Addr{a}}, []netip.Addr{a}},
		{"api's address handed over (the mark cleared)", api, &derived{served: true, ds: dataplane.Service{Namespace: "ns", Name: "api", VIPs: []netip.Addr{a, b}}}, nil},
		{"web gone", web, nil, nil},
	}
	for _, st := range steps {
		s.set(st.key, st.d)
		if got := s.awaitingCarried(); !slices.Equal(got, st.want) {
			t.Errorf("%s: awaitingCarried = %v, want %v", st.desc, got, st.want)
		}
	}
}
