package announce

import (
	"maps"
	"net"
	"net/netip"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// TestDecideProbes runs node a, alone, through the passes of probing before
// the first announcement; each step builds on the memory the last one left.
func TestDecideProbes(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := election.Node{Name: "a", Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.11/24")}}}
	b := election.Node{Name: "b", Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.12/24")}}}
	l2 := vipCandidacy{group: &paasv1.IPGroup{ObjectMeta: metav1.ObjectMeta{Name: "l2"}}}
	fresh, failover, adopted := netip.MustParseAddr("192.0.2.1"), netip.MustParseAddr("192.0.2.2"), netip.MustParseAddr("192.0.2.3")
	used := netip.MustParseAddr("192.0.2.4")
	mac, _ := net.ParseMAC("02:00:00:00:00:cc")
	entry := func(vip netip.Addr, by []string, conds ...metav1.Condition) *paasv1.IP {
		ip := &paasv1.IP{ObjectMeta: metav1.ObjectMeta{Name: paasv1.IPObjectName(vip)}, Status: paasv1.IPStatus{AnnouncedBy: by, Conditions: conds}}
		if vip == adopted {
			ip.Annotations = map[string]string{paasv1.AdoptedAnnotation: t0.Format(time.RFC3339)}
		}
		return ip
	}
	inUse := metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionTrue, LastTransitionTime: metav1.NewTime(t0)}
	silent := metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionFalse, LastTransitionTime: metav1.NewTime(t0)}
	// A record of an address in use that no Service shows, elected to a and
	// one elected to b.
	var toA, toB netip.Addr
	for i := 100; i < 200 && (!toA.IsValid() || !toB.IsValid()); i++ {
		vip := netip.AddrFrom4([4]byte{192, 0, 2, byte(i)})
		if owner, _, _ := election.Owner(vip, election.Candidacy{}, []election.Node{a, b}); owner == "a" {
			toA = vip
		} else {
			toB = vip
		}
	}
	records := map[netip.Addr]lanRecord{toA: {ip: entry(toA, nil, inUse)}, toB: {ip: entry(toB, nil, inUse)}}

	policy := announcerPolicy{self: "a", probe: ProbeConfig{Tries: 3, Interval: 300 * time.Millisecond, Recheck: 5 * time.Minute}}
	vips := map[netip.Addr]vipCandidacy{fresh: l2, failover: l2, adopted: l2}
	steps := []struct {
		desc   string
		obs    observation
		own    []netip.Addr
		claim  []netip.Addr
		probe  []netip.Addr
		noneOf []netip.Addr // not released either
		// requeue, when set, is when the pass asks to look again
		requeue time.Duration
	}{
		{
			desc: "an address never announced is withheld and probed; one announced before (a failover) or adopted from another load balancer is announced at once",
			obs: observation{now: t0, vips: vips, alive: []election.Node{a}, known: 1,
				ledger: map[netip.Addr]*paasv1.IP{fresh: entry(fresh, nil), failover: entry(failover, []string{"b"}), adopted: entry(adopted, nil)}},
			own: []netip.Addr{failover, adopted}, claim: []netip.Addr{adopted, failover}, probe: []netip.Addr{fresh},
		},
		{
			desc: "still being probed: withheld, not probed twice (the probes skip what is in flight anyway)",
			obs: observation{now: t0.Add(100 * time.Millisecond), vips: vips, alive: []election.Node{a}, known: 1,
				ledger: map[netip.Addr]*paasv1.IP{fresh: entry(fresh, nil), failover: entry(failover, []string{"a"}), adopted: entry(adopted, []string{"a"})}},
			own: []netip.Addr{failover, adopted}, probe: []netip.Addr{fresh},
		},
		{
			desc: "the probe met silence: announced and claimed",
			obs: observation{now: t0.Add(time.Second), vips: vips, alive: []election.Node{a}, known: 1,
				ledger: map[netip.Addr]*paasv1.IP{fresh: entry(fresh, nil), failover: entry(failover, []string{"a"}), adopted: entry(adopted, []string{"a"})},
				probed: map[netip.Addr]probeResult{fresh: {at: t0.Add(time.Second)}}},
			own: []netip.Addr{fresh, failover, adopted}, claim: []netip.Addr{fresh},
		},
		{
			desc: "a new address a host answered for: withheld, not probed again while the verdict is on its way to the ledger",
			obs: observation{now: t0.Add(2 * time.Second), vips: map[netip.Addr]vipCandidacy{used: l2}, alive: []election.Node{a}, known: 1,
				ledger: map[netip.Addr]*paasv1.IP{used: entry(used, nil)},
				probed: map[netip.Addr]probeResult{used: {at: t0.Add(2 * time.Second), mac: mac}}},
			probe: nil, noneOf: []netip.Addr{fresh, failover, adopted, used},
		},
		{
			desc: "the ledger says it is in use: withheld; rechecked once the recheck period has passed",
			obs: observation{now: t0.Add(6 * time.Minute), vips: map[netip.Addr]vipCandidacy{used: l2}, alive: []election.Node{a}, known: 1,
				ledger: map[netip.Addr]*paasv1.IP{used: entry(used, nil, inUse)},
				probed: map[netip.Addr]probeResult{used: {at: t0.Add(2 * time.Second), mac: mac}}},
			probe: []netip.Addr{used},
		},
		{
			desc:  "records no Service shows: the one elected to this node is rechecked, the other node's is not",
			obs:   observation{now: t0.Add(6 * time.Minute), alive: []election.Node{a, b}, known: 2, lanInUse: records},
			probe: []netip.Addr{toA},
		},
		{
			desc:    "too early for a recheck of the record: the pass looks again when it is due",
			obs:     observation{now: t0.Add(time.Minute), alive: []election.Node{a, b}, known: 2, lanInUse: records},
			requeue: 4 * time.Minute,
		},
		{
			desc: "the verdict cleared by a silent recheck: announced without another probe",
			obs: observation{now: t0.Add(7 * time.Minute), vips: map[netip.Addr]vipCandidacy{used: l2}, alive: []election.Node{a}, known: 1,
				ledger: map[netip.Addr]*paasv1.IP{used: entry(used, nil, silent)}},
			own: []netip.Addr{used}, claim: []netip.Addr{used},
		},
	}
	var m carryover
	for _, s := range steps {
		d, next := decide(policy, s.obs, m)
		m = next
		if got := sorted(slices.Collect(maps.Keys(d.own))); !slices.Equal(got, sorted(s.own)) {
			t.Errorf("%s: answers for %v, want %v", s.desc, got, sorted(s.own))
		}
		if !slices.Equal(d.claim, sorted(s.claim)) {
			t.Errorf("%s: claims %v, want %v", s.desc, d.claim, sorted(s.claim))
		}
		if got := sorted(slices.Collect(maps.Keys(d.probe))); !slices.Equal(got, sorted(s.probe)) {
			t.Errorf("%s: probes %v, want %v", s.desc, got, sorted(s.probe))
		}
		for vip, iface := range d.probe {
			if iface != "eth0" {
				t.Errorf("%s: probes %s on %q, want eth0", s.desc, vip, iface)
			}
		}
		if s.requeue != 0 && d.requeue != s.requeue {
			t.Errorf("%s: looks again in %s, want %s", s.desc, d.requeue, s.requeue)
		}
		for _, vip := range s.noneOf {
			if _, ok := d.release[vip]; ok {
				t.Errorf("%s: still answers for %s, never answered for or handed over", s.desc, vip)
			}
		}
	}
}

func sorted(addrs []netip.Addr) []netip.Addr {
	out := slices.Clone(addrs)
	slices.SortFunc(out, netip.Addr.Compare)
	if out == nil {
		out = []netip.Addr{}
	}
	return out
}

// A withheld VIP lost to another node is not answered for during the
// hand-over delay: it was never answered for.
func TestDecideProbesWithheldIsNotHandedOver(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	a := election.Node{Name: "a", Interfaces: []election.Interface{{Name: "eth0", Prefix: netip.MustParsePrefix("192.0.2.11/24")}}}
	vip := netip.MustParseAddr("192.0.2.1")
	policy := announcerPolicy{self: "a", handoverDelay: 2 * time.Second, probe: ProbeConfig{Tries: 3, Recheck: time.Minute}}
	obs := observation{now: t0, vips: map[netip.Addr]vipCandidacy{vip: {group: &paasv1.IPGroup{}}}, alive: []election.Node{a}, known: 1,
		ledger: map[netip.Addr]*paasv1.IP{vip: {}}}
	_, m := decide(policy, obs, carryover{})
	obs.now, obs.vips = t0.Add(time.Second), nil // the Service moved away
	d, _ := decide(policy, obs, m)
	if len(d.release) != 0 || len(d.own) != 0 {
		t.Fatalf("after losing a withheld VIP: answers %v, releases %v; want nothing", d.own, d.release)
	}
}

func TestProbeVerdict(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	vip := netip.MustParseAddr("192.0.2.1")
	mac, _ := net.ParseMAC("02:00:00:00:00:cc")
	inUse := metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionTrue}
	silent := metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionFalse}
	ip := func(by []string, conds ...metav1.Condition) *paasv1.IP {
		return &paasv1.IP{Status: paasv1.IPStatus{AnnouncedBy: by, Conditions: conds}}
	}
	for _, tc := range []struct {
		desc string
		ip   *paasv1.IP
		r    probeResult
		want metav1.ConditionStatus // "": no write
	}{
		{"never announced, a host answers: in use", ip(nil), probeResult{at: t0, mac: mac}, metav1.ConditionTrue},
		{"never announced, silence: nothing here (the claim records it)", ip(nil), probeResult{at: t0}, ""},
		{"in use, answered again: already so", ip(nil, inUse), probeResult{at: t0, mac: mac}, ""},
		{"in use, silence: cleared", ip(nil, inUse), probeResult{at: t0}, metav1.ConditionFalse},
		{"announced meanwhile: a host's answer is its announcer's conflict", ip([]string{"b"}), probeResult{at: t0, mac: mac}, ""},
		{"probed silent before: not a probe's to judge", ip(nil, silent), probeResult{at: t0, mac: mac}, ""},
	} {
		c := probeVerdict(tc.ip, vip, "a", "eth0", tc.r)
		switch {
		case tc.want == "" && c != nil:
			t.Errorf("%s: writes %s %s, want nothing", tc.desc, c.Status, c.Message)
		case tc.want != "" && (c == nil || c.Status != tc.want):
			t.Errorf("%s: writes %+v, want status %s", tc.desc, c, tc.want)
		case c != nil && c.Status == metav1.ConditionTrue && !strings.Contains(c.Message, mac.String()):
			t.Errorf("%s: the message does not name the MAC: %s", tc.desc, c.Message)
		}
	}
}

func TestClaimCondition(t *testing.T) {
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		desc    string
		ip      *paasv1.IP
		r       probeResult
		probing bool
		want    bool
	}{
		{"first announcement after a silent probe: recorded", &paasv1.IP{}, probeResult{at: t0}, true, true},
		{"a failover: announced before, nothing to record", &paasv1.IP{Status: paasv1.IPStatus{AnnouncedBy: []string{"b"}}}, probeResult{}, true, false},
		{"probing off: nothing to record", &paasv1.IP{}, probeResult{}, false, false},
	} {
		if got := claimCondition(tc.ip, "a", tc.r, tc.probing) != nil; got != tc.want {
			t.Errorf("%s: records %v, want %v", tc.desc, got, tc.want)
		}
	}
}
