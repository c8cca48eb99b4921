package nodeagent

import (
	"net/netip"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
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

// TestServiceOf: which Service an event concerns.
func TestServiceOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  any
		want string // "" = none
	}{
		{"a Service", &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web"}}, "a/web"},
		{"a slice names its Service by label", &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-x7f",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}, "a/web"},
		{"a slice without the label concerns none", &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-x7f"}}, ""},
		{"a slice with an empty label concerns none", &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s",
			Labels: map[string]string{discoveryv1.LabelServiceName: ""}}}, ""},
		{"anything else concerns none", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, ok := serviceOf(tc.obj)
			got := ""
			if ok {
				got = key.String()
			}
			if got != tc.want {
				t.Fatalf("serviceOf = %q, want %q", got, tc.want)
			}
		})
	}
}

func ledgerIP(addr, owner string) *paasv1.IP {
	ip := &paasv1.IP{Spec: paasv1.IPSpec{Address: addr}}
	if owner != "" {
		k := nn(owner)
		ip.Spec.Owner = &paasv1.IPOwner{Namespace: k.Namespace, Name: k.Name, UID: "u"}
	}
	return ip
}

// TestChanges: what events mark is what one take returns, once; a failed sync gives it back.
func TestChanges(t *testing.T) {
	for _, tc := range []struct {
		name      string
		events    func(c *dataChanges)
		wantKeys  []string
		wantAddrs []string
		wantAll   bool
	}{
		{"nothing happened", func(*dataChanges) {}, nil, nil, false},
		{"a burst on one Service is one key", func(c *dataChanges) {
			c.mark(nn("a/web"))
			c.mark(nn("a/web"), nn("b/db"))
		}, []string{"a/web", "b/db"}, nil, false},
		{"an empty key is no Service", func(c *dataChanges) { c.mark(types.NamespacedName{}) }, nil, nil, false},
		{"a ledger object marks its owner and its address", func(c *dataChanges) { c.markLedger(ledgerIP("192.0.2.10", "a/web")) },
			[]string{"a/web"}, []string{"192.0.2.10"}, false},
		{"an IPv4-mapped address is the IPv4 one", func(c *dataChanges) { c.markLedger(ledgerIP("::ffff:192.0.2.10", "")) },
			nil, []string{"192.0.2.10"}, false},
		{"a ledger object with garbage for an address marks its owner only", func(c *dataChanges) { c.markLedger(ledgerIP("not-an-ip", "a/web")) },
			[]string{"a/web"}, nil, false},
		{"a Node's addresses make everything stale", func(c *dataChanges) {
			c.mark(nn("a/web"))
			c.markAll()
		}, []string{"a/web"}, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var c dataChanges
			tc.events(&c)
			st := c.take()
			var addrs []string
			for _, a := range st.addrs {
				addrs = append(addrs, a.String())
			}
			slices.Sort(addrs)
			if got := keyStrings(st.keys); !slices.Equal(got, tc.wantKeys) && len(got)+len(tc.wantKeys) > 0 {
				t.Fatalf("keys = %v, want %v", got, tc.wantKeys)
			}
			if !slices.Equal(addrs, tc.wantAddrs) {
				t.Fatalf("addrs = %v, want %v", addrs, tc.wantAddrs)
			}
			if st.all != tc.wantAll {
				t.Fatalf("all = %v, want %v", st.all, tc.wantAll)
			}
			if again := c.take(); len(again.keys)+len(again.addrs) > 0 || again.all {
				t.Fatalf("a second take returned %+v: take must forget", again)
			}
			c.giveBack(st)
			back := c.take()
			if !slices.Equal(keyStrings(back.keys), keyStrings(st.keys)) || len(back.addrs) != len(st.addrs) || back.all != st.all {
				t.Fatalf("given back %+v, took %+v", st, back)
			}
		})
	}
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
		d.report.refusals = []refusal{{reason: paasv1.ReasonNotInLedger, detail: "x"}}
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
		stale       stale
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
			stale:     stale{addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
			wantStale: []string{"a/web"}, wantReports: []string{"a/web"},
		},
		{
			name: "an address event reaches every Service naming it, and only those",
			ops: []setOp{{"a/1", dsvc("a/1", []string{"192.0.2.1"}, false, false)}, {"b/2", dsvc("b/2", []string{"192.0.2.1", "192.0.2.2"}, false, false)},
				{"c/3", dsvc("c/3", []string{"192.0.2.3"}, false, false)}},
			wantServed: []string{"a/1", "b/2", "c/3"}, wantFam: map[dataplane.Family]int{dataplane.IPv4: 3},
			stale:     stale{addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}, keys: []types.NamespacedName{nn("c/3")}},
			wantStale: []string{"a/1", "b/2", "c/3"}, wantReports: []string{"a/1", "b/2", "c/3"},
		},
		{
			name:       "a Service that no longer names an address is no longer reached by it",
			ops:        []setOp{{"a/1", dsvc("a/1", []string{"192.0.2.1"}, false, false)}, {"a/1", dsvc("a/1", []string{"192.0.2.9"}, false, false)}},
			wantServed: []string{"a/1"}, wantFam: map[dataplane.Family]int{dataplane.IPv4: 1},
			stale:     stale{addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
			wantStale: nil, wantReports: nil,
		},
		{
			name: "a refused Service is reported at every sync, a Service with a VIP on this node derived at every sync",
			ops: []setOp{{"a/refused", dsvc("a/refused", []string{"192.0.2.1"}, true, false)}, {"a/local", dsvc("a/local", []string{"192.0.2.2"}, false, true)},
				{"a/plain", dsvc("a/plain", []string{"192.0.2.3"}, false, false)}},
			wantServed: []string{"a/local", "a/plain"}, wantFam: map[dataplane.Family]int{dataplane.IPv4: 2},
			stale:     stale{},
			wantStale: []string{"a/local"}, wantReports: []string{"a/local", "a/refused"},
		},
		{
			name:       "a gone Service leaves the refused and local sets and the index",
			ops:        []setOp{{"a/refused", dsvc("a/refused", []string{"192.0.2.1"}, true, true)}, {"a/refused", nil}},
			wantServed: nil, wantFam: map[dataplane.Family]int{},
			stale:     stale{addrs: []netip.Addr{netip.MustParseAddr("192.0.2.1")}},
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
