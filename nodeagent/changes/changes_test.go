package changes

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
)

func nn(s string) types.NamespacedName {
	ns, name, _ := strings.Cut(s, "/")
	return types.NamespacedName{Namespace: ns, Name: name}
}

func service(key string) *corev1.Service {
	k := nn(key)
	return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: k.Namespace, Name: k.Name}}
}

func ledgerIP(addr string) *paasv1.IP {
	return &paasv1.IP{Spec: paasv1.IPSpec{Address: addr}}
}

// TestServiceOf: which Service an event concerns.
func TestServiceOf(t *testing.T) {
	for _, tc := range []struct {
		name string
		obj  any
		want string // "" = none
	}{
		{"a Service", service("a/web"), "a/web"},
		{"a slice names its Service by label", &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-x7f",
			Labels: map[string]string{discoveryv1.LabelServiceName: "web"}}}, "a/web"},
		{"a slice without the label concerns none", &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "web-x7f"}}, ""},
		{"a slice with an empty label concerns none", &discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s",
			Labels: map[string]string{discoveryv1.LabelServiceName: ""}}}, ""},
		{"anything else concerns none", &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			key, ok := ServiceOf(tc.obj)
			got := ""
			if ok {
				got = key.String()
			}
			if got != tc.want {
				t.Fatalf("ServiceOf = %q, want %q", got, tc.want)
			}
		})
	}
}

// TestTracker: what events mark is what one Take returns, once; a failed pass
// puts it back.
func TestTracker(t *testing.T) {
	for _, tc := range []struct {
		name      string
		events    func(t *Tracker)
		wantKeys  []string
		wantAddrs []string
		wantAll   bool
	}{
		{"nothing happened", func(*Tracker) {}, nil, nil, false},
		{"a burst on one Service is one key", func(t *Tracker) {
			t.Observe(service("a/web"))
			t.Observe(service("a/web"))
			t.MarkService(nn("a/web"), nn("b/db"))
		}, []string{"a/web", "b/db"}, nil, false},
		{"an empty key is no Service", func(t *Tracker) { t.MarkService(types.NamespacedName{}) }, nil, nil, false},
		{"a slice of no Service changes nothing", func(t *Tracker) {
			t.Observe(&discoveryv1.EndpointSlice{ObjectMeta: metav1.ObjectMeta{Namespace: "a", Name: "s"}})
		}, nil, nil, false},
		{"a ledger entry is its address", func(t *Tracker) { t.Observe(ledgerIP("192.0.2.10")) }, nil, []string{"192.0.2.10"}, false},
		{"an IPv4-mapped address is the IPv4 one", func(t *Tracker) { t.Observe(ledgerIP("::ffff:192.0.2.10")) }, nil, []string{"192.0.2.10"}, false},
		{"a ledger entry with garbage for an address changes everything", func(t *Tracker) { t.Observe(ledgerIP("not-an-ip")) }, nil, nil, true},
		{"a Node changes everything", func(t *Tracker) {
			t.Observe(service("a/web"))
			t.Observe(&corev1.Node{})
		}, []string{"a/web"}, nil, true},
		{"MarkAll", func(t *Tracker) { t.MarkAll() }, nil, nil, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var tr Tracker
			tc.events(&tr)
			s := tr.Take()
			if got := sorted(s.Services); !slices.Equal(got, tc.wantKeys) && len(got)+len(tc.wantKeys) > 0 {
				t.Fatalf("services = %v, want %v", got, tc.wantKeys)
			}
			if got := sorted(s.Addrs); !slices.Equal(got, tc.wantAddrs) && len(got)+len(tc.wantAddrs) > 0 {
				t.Fatalf("addrs = %v, want %v", got, tc.wantAddrs)
			}
			if s.All != tc.wantAll {
				t.Fatalf("all = %v, want %v", s.All, tc.wantAll)
			}
			if s.Empty() != (len(tc.wantKeys)+len(tc.wantAddrs) == 0 && !tc.wantAll) {
				t.Fatalf("empty = %v for %+v", s.Empty(), s)
			}
			if again := tr.Take(); !again.Empty() {
				t.Fatalf("a second take returned %+v: Take must forget", again)
			}
			tr.PutBack(s)
			back := tr.Take()
			if !slices.Equal(sorted(back.Services), sorted(s.Services)) || !slices.Equal(sorted(back.Addrs), sorted(s.Addrs)) || back.All != s.All {
				t.Fatalf("put back %+v, took %+v", s, back)
			}
		})
	}
}

func sorted[K interface {
	comparable
	String() string
}](m map[K]bool) []string {
	var out []string
	for k := range m {
		out = append(out, k.String())
	}
	slices.Sort(out)
	return out
}

func TestAddrUnmapped(t *testing.T) {
	var s Set
	s.AddAddr(netip.MustParseAddr("::ffff:192.0.2.1"))
	if !s.Addrs[netip.MustParseAddr("192.0.2.1")] {
		t.Fatalf("addrs = %v", s.Addrs)
	}
}
