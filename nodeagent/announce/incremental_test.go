package announce

import (
	"context"
	"fmt"
	"maps"
	"math/rand/v2"
	"net/netip"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/nodeagent/changes"
)

// TestDecideIncremental: a pass that names the VIPs that changed elects only
// those and keeps the rest as the last pass left them; the steps build on
// each other's memory, as Reconcile does.
func TestDecideIncremental(t *testing.T) {
	lanNode := func(name string) election.Node {
		return election.Node{Name: name, Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.1/24")}}}
	}
	a, b := lanNode("a"), lanNode("b")
	// Three VIPs a wins against b, found rather than assumed.
	var won []netip.Addr
	for i := 32; len(won) < 3; i++ {
		vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		if owner, _, _ := election.Owner(vip, election.Candidacy{}, []election.Node{a, b}); owner == "a" {
			won = append(won, vip)
		}
	}
	x, y, z := won[0], won[1], won[2]
	l2 := vipCandidacy{group: &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "l2"}}}
	set := func(vips ...netip.Addr) map[netip.Addr]bool {
		out := map[netip.Addr]bool{}
		for _, v := range vips {
			out[v] = true
		}
		return out
	}
	cands := func(vips ...netip.Addr) map[netip.Addr]vipCandidacy {
		out := map[netip.Addr]vipCandidacy{}
		for _, v := range vips {
			out[v] = l2
		}
		return out
	}
	steps := []struct {
		desc         string
		vips         map[netip.Addr]vipCandidacy
		changed      map[netip.Addr]bool
		alive        []election.Node
		own          []netip.Addr
		gained, lost []netip.Addr
	}{
		{desc: "a full pass elects every VIP", vips: cands(x, y), changed: nil, alive: []election.Node{a, b},
			own: []netip.Addr{x, y}, gained: []netip.Addr{x, y}},
		{desc: "a new VIP: only it is elected, the others are kept", vips: cands(x, y, z), changed: set(z), alive: []election.Node{a, b},
			own: []netip.Addr{x, y, z}, gained: []netip.Addr{z}},
		{desc: "a VIP gone: only it is dropped", vips: cands(x, z), changed: set(y), alive: []election.Node{a, b},
			own: []netip.Addr{x, z}, lost: []netip.Addr{y}},
		{desc: "a pass with nothing changed keeps everything", vips: cands(x, z), changed: set(), alive: []election.Node{a, b},
			own: []netip.Addr{x, z}},
		{desc: "a VIP that changed but still is a's stays, with no gain", vips: cands(x, z), changed: set(x), alive: []election.Node{a, b},
			own: []netip.Addr{x, z}},
	}
	var m carryover
	for _, s := range steps {
		d, next := decide(announcerPolicy{self: "a"}, observation{now: time.Unix(0, 0), vips: s.vips, changed: s.changed, alive: s.alive, known: 2}, m)
		m = next
		if got := slices.SortedFunc(maps.Keys(d.own), netip.Addr.Compare); !slices.Equal(got, s.own) {
			t.Errorf("%s: owns %v, want %v", s.desc, got, s.own)
		}
		if !slices.Equal(d.gained, s.gained) || !slices.Equal(d.lost, s.lost) {
			t.Errorf("%s: gained %v lost %v, want %v %v", s.desc, d.gained, d.lost, s.gained, s.lost)
		}
	}
}

// TestDecideIncrementalAgreesWithFull: over random changes to the VIPs, the
// pass that elects only the VIPs that changed decides what a full pass
// decides from the same memory.
func TestDecideIncrementalAgreesWithFull(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var alive []election.Node
	for _, n := range []string{"a", "b", "c"} {
		alive = append(alive, election.Node{Name: n, Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.1/24")}}})
	}
	l2 := vipCandidacy{group: &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "l2"}}}
	vips := map[netip.Addr]vipCandidacy{}
	var m carryover
	p := announcerPolicy{self: "a", handoverDelay: time.Second}
	now := time.Unix(0, 0)
	for step := range 200 {
		changed := map[netip.Addr]bool{}
		for range rng.IntN(5) {
			vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(32 + rng.IntN(64))})
			changed[vip] = true
			if _, ok := vips[vip]; ok {
				delete(vips, vip)
			} else {
				vips[vip] = l2
			}
		}
		now = now.Add(300 * time.Millisecond)
		inc, incNext := decide(p, observation{now: now, vips: vips, changed: changed, alive: alive, known: 3}, m)
		full, _ := decide(p, observation{now: now, vips: vips, alive: alive, known: 3}, m)
		if !maps.Equal(inc.own, full.own) || !slices.Equal(inc.gained, full.gained) || !slices.Equal(inc.lost, full.lost) ||
			!maps.Equal(inc.release, full.release) {
			t.Fatalf("step %d (changed %v): incremental owns %v (+%v -%v, releasing %v), full %v (+%v -%v, releasing %v)", step, changed,
				inc.own, inc.gained, inc.lost, inc.release, full.own, full.gained, full.lost, full.release)
		}
		m = incNext
	}
}

// TestObserveChanged: after each change, told to the tracker as an event
// would, the announcer's incremental reading equals a full reading of the
// same cluster.
func TestObserveChanged(t *testing.T) {
	ctx := context.Background()
	svc, ledger := uidService, lanLedger
	c := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).WithObjects(
		&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "192.0.2.0/24"}},
		&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}},
		svc("web", "192.0.2.10"), ledger("192.0.2.10", "web"),
		svc("db", "192.0.2.11"), ledger("192.0.2.11", "db"),
	).Build()
	announcer := func() *Announcer {
		return &Announcer{Client: c, NodeName: "node1", Liveness: staticLiveness{"node1": false},
			LocalAddresses: func() (map[netip.Addr]string, error) { return nil, nil }}
	}
	a := announcer()
	if _, _, err := a.observe(ctx, changes.Set{}); err != nil {
		t.Fatal(err)
	}
	get := func(o client.Object, name string) client.Object {
		key := client.ObjectKey{Namespace: "ns", Name: name}
		if _, ip := o.(*paasv1.IP); ip {
			key.Namespace = "" // the ledger is cluster-scoped
		}
		if err := c.Get(ctx, key, o); err != nil {
			t.Fatal(err)
		}
		return o
	}
	steps := []struct {
		desc   string
		change func() []client.Object // what the events are about
		want   []string
	}{
		{"a new Service, its ledger entry first", func() []client.Object {
			ip, s := ledger("192.0.2.12", "api"), svc("api", "192.0.2.12")
			must(t, c.Create(ctx, ip), c.Create(ctx, s))
			return []client.Object{ip, s}
		}, []string{"192.0.2.10", "192.0.2.11", "192.0.2.12"}},
		{"a Service deleted (its entry stays a while)", func() []client.Object {
			s := get(&corev1.Service{}, "db")
			must(t, c.Delete(ctx, s))
			return []client.Object{s}
		}, []string{"192.0.2.10", "192.0.2.12"}},
		{"a Service's status names another VIP, which the ledger does not give it", func() []client.Object {
			s := get(&corev1.Service{}, "web").(*corev1.Service)
			s.Status.LoadBalancer.Ingress[0].IP = "192.0.2.11"
			must(t, c.Status().Update(ctx, s))
			return []client.Object{s}
		}, []string{"192.0.2.12"}},
		{"the ledger gives that VIP to the Service", func() []client.Object {
			ip := get(&paasv1.IP{}, "192.0.2.11").(*paasv1.IP)
			ip.Spec.Owner = &paasv1.IPOwner{Namespace: "ns", Name: "web", UID: "uid-web"}
			must(t, c.Update(ctx, ip))
			return []client.Object{ip}
		}, []string{"192.0.2.11", "192.0.2.12"}},
	}
	for _, s := range steps {
		for _, o := range s.change() {
			a.changes.Observe(o)
		}
		o, _, err := a.observe(ctx, a.changes.Take())
		if err != nil {
			t.Fatal(err)
		}
		if o.changed == nil {
			t.Errorf("%s: a full pass, want an incremental one", s.desc)
		}
		full, _, err := announcer().observe(ctx, changes.Set{})
		if err != nil {
			t.Fatal(err)
		}
		got, want := addrStrings(o.vips), addrStrings(full.vips)
		if !slices.Equal(got, want) || !slices.Equal(got, s.want) || !slices.Equal(addrStrings(o.ledger), want) {
			t.Errorf("%s: incremental reads %v (ledger %v), a full reading %v, want %v", s.desc, got, addrStrings(o.ledger), want, s.want)
		}
	}
}

type staticLiveness map[string]bool

func (l staticLiveness) AliveDraining() map[string]bool { return l }
func (staticLiveness) Changed() <-chan struct{}         { return nil }

func addrStrings[V any](m map[netip.Addr]V) []string {
	var out []string
	for _, v := range slices.SortedFunc(maps.Keys(m), netip.Addr.Compare) {
		out = append(out, v.String())
	}
	return out
}

func must(t testing.TB, errs ...error) {
	t.Helper()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
}

// BenchmarkAnnouncePass is one announce pass's reading and deciding (no
// writes) with n Services holding a VIP each, read from a fake client (which
// deep-copies as the cache does): a full pass, what every pass cost before
// the change tracker, against an incremental pass after one new Service.
//
//	go test ./nodeagent -run '^$' -bench BenchmarkAnnouncePass -benchtime 20x
func BenchmarkAnnouncePass(b *testing.B) {
	for _, n := range []int{1000, 10000} {
		objs := []client.Object{
			&paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "lan"}, Spec: paasv1.IPGroupSpec{Segment: "2001:db8::/64"}},
			&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node1"}},
		}
		for i := range n {
			objs = append(objs, benchService(i), benchLedger(i))
		}
		c := fake.NewClientBuilder().WithScheme(paasv1.NewScheme()).WithObjects(objs...).Build()
		a := &Announcer{Client: c, NodeName: "node1", Liveness: staticLiveness{"node1": false},
			LocalAddresses: func() (map[netip.Addr]string, error) { return nil, nil }}
		p := announcerPolicy{self: "node1"}
		ctx := context.Background()
		b.Run(fmt.Sprintf("full/%d", n), func(b *testing.B) {
			for b.Loop() {
				o, _, err := a.observe(ctx, changes.Set{All: true})
				if err != nil {
					b.Fatal(err)
				}
				_, a.last = decide(p, o, a.last)
			}
		})
		b.Run(fmt.Sprintf("one-new-service/%d", n), func(b *testing.B) {
			i := n
			for b.Loop() {
				b.StopTimer()
				svc, ip := benchService(i), benchLedger(i)
				must(b, c.Create(ctx, ip), c.Create(ctx, svc))
				a.changes.Observe(svc)
				a.changes.Observe(ip)
				i++
				b.StartTimer()
				o, _, err := a.observe(ctx, a.changes.Take())
				if err != nil {
					b.Fatal(err)
				}
				if o.changed == nil {
					b.Fatal("a full pass")
				}
				_, a.last = decide(p, o, a.last)
			}
		})
	}
}

// uidService is the LoadBalancer Service ns/name (uid "uid-"+name) holding ips.
func uidService(name string, ips ...string) *corev1.Service {
	s := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
		Spec: corev1.ServiceSpec{Type: corev1.ServiceTypeLoadBalancer}}
	for _, ip := range ips {
		s.Status.LoadBalancer.Ingress = append(s.Status.LoadBalancer.Ingress, corev1.LoadBalancerIngress{IP: ip, IPMode: ptr.To(corev1.LoadBalancerIPModeProxy)})
	}
	return s
}

// lanLedger is the ledger entry of addr, in group lan, giving it to ns/owner.
func lanLedger(addr, owner string) *paasv1.IP {
	return &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(netip.MustParseAddr(addr)), Labels: map[string]string{paasv1.IPGroupLabel: "lan"}},
		Spec: paasv1.IPSpec{Address: addr, Owner: &paasv1.IPOwner{Namespace: "ns", Name: owner, UID: types.UID("uid-" + owner)}}}
}

func benchService(i int) *corev1.Service {
	return uidService(fmt.Sprintf("svc-%d", i), benchVIP(i).String())
}

func benchLedger(i int) *paasv1.IP { return lanLedger(benchVIP(i).String(), fmt.Sprintf("svc-%d", i)) }

func benchVIP(i int) netip.Addr {
	return netip.AddrFrom16([16]byte{0x20, 0x01, 0x0d, 0xb8, 14: byte(i >> 8), 15: byte(i)}).Unmap()
}
