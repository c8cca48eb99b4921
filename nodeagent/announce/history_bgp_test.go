package announce

import (
	"net/netip"
	"reflect"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/bgp"
)

// TestAdvertiserEntries: the history entries a write of a BGP VIP's
// advertisers adds, for the writer joining or leaving and for the recorder
// pruning another node in each of its states.
func TestAdvertiserEntries(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 10, 0, time.UTC)
	at := metav1.NewTime(t0)
	routeAt := metav1.NewTime(t0.Add(-3 * time.Second))
	up := routeChange{noticed: t0.Add(-3 * time.Second), done: t0.Add(-3*time.Second + 40*time.Millisecond), advertised: true}
	down := up
	down.advertised = false
	a := election.Node{Name: "a"}
	alive := func(mods ...func(*election.Node)) []election.Node {
		b, c := election.Node{Name: "b"}, election.Node{Name: "c"}
		for _, m := range mods {
			m(&b)
		}
		return []election.Node{a, b, c}
	}
	for _, tc := range []struct {
		desc      string
		cur, next []string
		alive     []election.Node
		route     routeChange
		routeOK   bool
		want      []paasv1.Failover
	}{
		{"a joins, its route advertised: gap from noticing to the call", []string{"b"}, []string{"a", "b"}, alive(), up, true,
			[]paasv1.Failover{{At: routeAt, To: "a", Cause: paasv1.FailoverElectionChange, GapMilliseconds: ptr.To[int64](40)}}},
		{"a joins, its route's last change a withdrawal: no gap", []string{"b"}, []string{"a", "b"}, alive(), down, true,
			[]paasv1.Failover{{At: at, To: "a", Cause: paasv1.FailoverElectionChange}}},
		{"a joins, no route change known", nil, []string{"a"}, alive(), routeChange{}, false,
			[]paasv1.Failover{{At: at, To: "a", Cause: paasv1.FailoverElectionChange}}},
		{"a already listed: nothing", []string{"a"}, []string{"a"}, alive(), up, true, nil},
		{"a cordoned leaves, route marked for graceful shutdown", []string{"a", "b"}, []string{"b"},
			[]election.Node{{Name: "a", Cordoned: true}, {Name: "b"}}, down, true,
			[]paasv1.Failover{{At: routeAt, From: "a", Cause: paasv1.FailoverExcluded, GapMilliseconds: ptr.To[int64](40)}}},
		{"a draining leaves", []string{"a"}, []string{}, []election.Node{{Name: "a", Draining: true}}, down, true,
			[]paasv1.Failover{{At: routeAt, From: "a", Cause: paasv1.FailoverPlannedMove, GapMilliseconds: ptr.To[int64](40)}}},
		{"a's session down, route still advertised: no gap", []string{"a"}, nil, alive(), up, true,
			[]paasv1.Failover{{At: at, From: "a", Cause: paasv1.FailoverElectionChange}}},
		{"recorder prunes dead b: no gap, a's route says nothing of b", []string{"a", "b", "c"}, []string{"a", "c"},
			[]election.Node{a, {Name: "c"}}, down, true,
			[]paasv1.Failover{{At: at, From: "b", Cause: paasv1.FailoverOwnerDead}}},
		{"recorder prunes draining b", []string{"b"}, nil, alive(func(n *election.Node) { n.Draining = true }), routeChange{}, false,
			[]paasv1.Failover{{At: at, From: "b", Cause: paasv1.FailoverPlannedMove}}},
		{"recorder prunes excluded b", []string{"b"}, nil, alive(func(n *election.Node) { n.Excluded = true }), routeChange{}, false,
			[]paasv1.Failover{{At: at, From: "b", Cause: paasv1.FailoverExcluded}}},
		{"recorder prunes cordoned b and joins itself", []string{"b", "c"}, []string{"a", "c"}, alive(func(n *election.Node) { n.Cordoned = true }), up, true,
			[]paasv1.Failover{
				{At: at, From: "b", Cause: paasv1.FailoverExcluded},
				{At: routeAt, To: "a", Cause: paasv1.FailoverElectionChange, GapMilliseconds: ptr.To[int64](40)}}},
		{"recorder prunes b, alive and eligible (its session down)", []string{"b"}, nil, alive(), routeChange{}, false,
			[]paasv1.Failover{{At: at, From: "b", Cause: paasv1.FailoverElectionChange}}},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			got := advertiserEntries("a", tc.cur, tc.next, tc.alive, t0.Add(500*time.Millisecond), tc.route, tc.routeOK)
			if !reflect.DeepEqual(got, tc.want) {
				t.Errorf("entries =\n%+v\nwant\n%+v", got, tc.want)
			}
		})
	}
}

func TestRouteFlips(t *testing.T) {
	route := func(s string) bgp.Route { return bgp.Route{Prefix: netip.PrefixFrom(netip.MustParseAddr(s), 32)} }
	got := routeFlips([]bgp.Route{route("192.0.2.1"), route("192.0.2.2")}, []bgp.Route{route("192.0.2.2"), route("192.0.2.3")})
	want := map[netip.Addr]bool{netip.MustParseAddr("192.0.2.1"): false, netip.MustParseAddr("192.0.2.3"): true}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("routeFlips = %v, want %v (192.0.2.2 stays advertised: no flip)", got, want)
	}
}
