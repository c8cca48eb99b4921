package announce

import (
	"context"
	"fmt"
	"net"
	"net/netip"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// Probing before the first announcement (docs/announcement.md). An address
// handed out for the first time may be in use on the LAN already; announcing
// it would point every host's neighbour entry at this node (the router's, if
// it is the router's address). So the L2 owner of an address never announced
// withholds it (neither answers for it nor announces it), probes it
// (l2.Speaker.Probe) and only then announces it, or, when a host answers,
// records the verdict on the ledger (the IP's InUseOnLAN condition) and never
// announces it; the operator moves the Service, or keeps it pending when it
// asked for the address. The owner of an address found in use probes it again
// every recheck period and clears the verdict when it meets silence. An
// address announced before is announced at once: a failover never waits.
//
// The decisions are pure (probeGate, probeVerdict) and table-tested; the
// probes run in the background, so a pass never waits for one, and their end
// makes the next pass look at the VIPs again.

// ProbeConfig is how the L2 owner probes an address before its first
// announcement.
type ProbeConfig struct {
	// Tries probes are sent, Interval apart; an answer within Interval of
	// the last one counts. 0 tries: no probe, addresses are announced at once.
	Tries    int
	Interval time.Duration
	// Recheck is how often an address found in use is probed again.
	Recheck time.Duration
}

// probeResult is the outcome of one probe of a VIP.
type probeResult struct {
	at  time.Time
	mac net.HardwareAddr // nil: silence
}

// lanRecord is a ledger entry whose address a host on the LAN uses and no
// Service shows (the operator moved its Service away, or keeps it pending):
// its L2 owner probes it again now and then.
type lanRecord struct {
	ip *paasv1.IP
	c  election.Candidacy
}

// probeGate withholds, of the L2 VIPs this node owns (own, by interface), each
// never announced until a fresh probe (o.probed) found it silent, and each in
// use on the LAN; it returns the VIPs answered for, and the VIPs to probe now
// (by interface): those withheld with no fresh result, and those in use on the
// LAN whose recheck is due, own or, for records no Service shows (o.lanInUse),
// elected to this node; and how long until the next recheck is due (0:
// none). Probing off (p.Tries 0), nothing is withheld.
func probeGate(p ProbeConfig, self string, o observation, own map[netip.Addr]string, majority bool) (answer map[netip.Addr]string, withheld map[netip.Addr]bool, probe map[netip.Addr]string, next time.Duration) {
	answer, withheld, probe = map[netip.Addr]string{}, map[netip.Addr]bool{}, map[netip.Addr]string{}
	due := func(vip netip.Addr, iface string, c *metav1.Condition, r probeResult, probed bool) {
		if in := recheckIn(p, c, r, probed, o.now); in == 0 {
			probe[vip] = iface
		} else if next == 0 || in < next {
			next = in
		}
	}
	for vip, iface := range own {
		ip := o.ledger[vip]
		if p.Tries == 0 || ip == nil || ip.EverAnnounced() {
			answer[vip] = iface
			continue
		}
		r, probed := o.probed[vip]
		if c, inUse := ip.InUseOnLAN(); inUse {
			withheld[vip] = true
			due(vip, iface, c, r, probed)
			continue
		}
		if probed && r.mac == nil && o.now.Sub(r.at) < p.Recheck {
			answer[vip] = iface
			continue
		}
		// Not probed, or found in use (a verdict the ledger does not show
		// yet; probed again once it is stale), or silent too long ago.
		withheld[vip] = true
		due(vip, iface, nil, r, probed)
	}
	if p.Tries == 0 || !majority {
		return answer, withheld, probe, next
	}
	for vip, rec := range o.lanInUse {
		c, inUse := rec.ip.InUseOnLAN()
		if _, shown := o.vips[vip]; shown || !inUse {
			continue
		}
		node, iface, ok := election.Owner(vip, rec.c, o.alive)
		if !ok || node != self {
			continue
		}
		r, probed := o.probed[vip]
		due(vip, iface, c, r, probed)
	}
	return answer, withheld, probe, next
}

// recheckIn is how long until an address is due for another probe (0: now):
// the recheck period after this node's last probe of it and, when it was
// found in use (c), after the verdict.
func recheckIn(p ProbeConfig, c *metav1.Condition, last probeResult, probed bool, now time.Time) time.Duration {
	var in time.Duration
	if c != nil {
		in = c.LastTransitionTime.Add(p.Recheck).Sub(now)
	}
	if probed {
		in = max(in, last.at.Add(p.Recheck).Sub(now))
	}
	return max(in, 0)
}

// probeVerdict is the InUseOnLAN condition self writes on ip after probing
// its address (vip, on iface) with result r, or nil when nothing changes: a
// host answered and the address is not already marked in use (True); the
// address was marked in use and the probe met silence (False, the verdict
// cleared). A silent first probe writes nothing here: the announcement's
// claim records it (claimCondition). An address announced meanwhile is its
// announcer's: a claim of it is a Conflict, not a probe's verdict.
func probeVerdict(ip *paasv1.IP, vip netip.Addr, self, iface string, r probeResult) *metav1.Condition {
	if ip.EverAnnounced() && !inUseMarked(ip) {
		return nil
	}
	_, inUse := ip.InUseOnLAN()
	switch {
	case r.mac != nil && !inUse:
		return &metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionTrue, Reason: paasv1.ReasonProbeAnswered,
			Message: fmt.Sprintf("%s answered the %s probe node %s sent on %s for %s at %s, before announcing it for the first time: a host on the LAN uses the address, so no node announces it; free the address there, or delete this IP object once it is free (the next owner probes it again)",
				r.mac, protocolOf(vip), self, iface, vip, r.at.UTC().Format(time.RFC3339))}
	case r.mac == nil && inUse:
		return &metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionFalse, Reason: paasv1.ReasonProbeSilent,
			Message: fmt.Sprintf("nothing answered the %s probe node %s sent on %s for %s at %s: the address is free again",
				protocolOf(vip), self, iface, vip, r.at.UTC().Format(time.RFC3339))}
	}
	return nil
}

// inUseMarked reports whether ip carries InUseOnLAN True, announced or not.
func inUseMarked(ip *paasv1.IP) bool {
	return meta.IsStatusConditionTrue(ip.Status.Conditions, paasv1.IPConditionInUseOnLAN)
}

// claimCondition is the InUseOnLAN condition self's claim of ip records, or
// nil: an address announced for the first time was probed silent just before
// (probeGate let it through), and the condition says so from then on, so
// that no later owner probes it again.
func claimCondition(ip *paasv1.IP, self string, r probeResult, probing bool) *metav1.Condition {
	if !probing || ip.EverAnnounced() || r.at.IsZero() || r.mac != nil {
		return nil
	}
	return &metav1.Condition{Type: paasv1.IPConditionInUseOnLAN, Status: metav1.ConditionFalse, Reason: paasv1.ReasonProbeSilent,
		Message: fmt.Sprintf("nothing answered the probe node %s sent at %s before announcing the address for the first time", self, r.at.UTC().Format(time.RFC3339))}
}

// probes runs the probes of one agent and keeps their results.
type probes struct {
	cfg ProbeConfig
	// wake is sent an event naming a probed VIP when a probe ends; the
	// announcer's next pass looks at the probed VIPs again.
	wake chan event.GenericEvent

	mu       sync.Mutex
	inFlight map[netip.Addr]bool
	results  map[netip.Addr]probeResult
}

// Defaults of ProbeConfig's durations, where they are unset.
const (
	defaultProbeInterval = 330 * time.Millisecond
	defaultProbeRecheck  = 5 * time.Minute
)

// withDefaults fills the unset durations of c.
func (c ProbeConfig) withDefaults() ProbeConfig {
	if c.Interval <= 0 {
		c.Interval = defaultProbeInterval
	}
	if c.Recheck <= 0 {
		c.Recheck = defaultProbeRecheck
	}
	return c
}

func newProbes(cfg ProbeConfig) *probes {
	return &probes{cfg: cfg, wake: make(chan event.GenericEvent, 1), inFlight: map[netip.Addr]bool{}, results: map[netip.Addr]probeResult{}}
}

// woken is the channel of wake (one that never fires when p is nil: no probes).
func (p *probes) woken() <-chan event.GenericEvent {
	if p == nil {
		return make(chan event.GenericEvent)
	}
	return p.wake
}

// snapshot is the latest result of every VIP probed; results of VIPs no
// longer probed are dropped after twice the recheck period.
func (p *probes) snapshot(now time.Time) map[netip.Addr]probeResult {
	if p == nil {
		return nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make(map[netip.Addr]probeResult, len(p.results))
	for vip, r := range p.results {
		if now.Sub(r.at) > 2*p.cfg.Recheck && !p.inFlight[vip] {
			delete(p.results, vip)
			continue
		}
		out[vip] = r
	}
	return out
}

// probeDue starts, in the background, the probes a pass asked for (none
// of a VIP already being probed); each result is recorded, written on the
// ledger when it is a verdict (probeVerdict), and wakes the announcer.
func (a *Announcer) probeDue(ctx context.Context, due map[netip.Addr]string) {
	p := a.probes
	if p == nil || len(due) == 0 {
		return
	}
	batch := map[netip.Addr]string{}
	p.mu.Lock()
	for vip, iface := range due {
		if !p.inFlight[vip] {
			p.inFlight[vip], batch[vip] = true, iface
		}
	}
	p.mu.Unlock()
	if len(batch) == 0 {
		return
	}
	go a.runProbes(ctx, batch)
}

// runProbes probes batch (by interface), records each result, writes each
// verdict on the ledger and wakes the announcer for the VIPs it has a result
// for. A VIP not probed at all (its interface failed, or the agent is
// stopping) gets no result: the next pass asks again, and no pass is woken
// for it, so a failing interface costs a try per pass, not a loop.
func (a *Announcer) runProbes(ctx context.Context, batch map[netip.Addr]string) {
	p, log := a.probes, ctrl.LoggerFrom(ctx)
	heard, err := a.Speaker.Probe(ctx, batch, p.cfg.Tries, p.cfg.Interval)
	now := time.Now()
	if err != nil {
		log.Error(err, "probing addresses before their first announcement failed on some interfaces; retried at the next pass")
	}
	results := map[netip.Addr]probeResult{}
	p.mu.Lock()
	for vip := range batch {
		delete(p.inFlight, vip)
		mac, claimed := heard[vip]
		if !claimed && err != nil {
			continue
		}
		results[vip] = probeResult{at: now, mac: mac}
		p.results[vip] = results[vip]
	}
	p.mu.Unlock()
	var woken *paasv1.IP
	for vip, r := range results {
		probesTotal.WithLabelValues(probeOutcome(r.mac != nil)).Inc()
		if werr := a.recordProbe(ctx, vip, batch[vip], r); werr != nil {
			log.Error(werr, "recording a probe's verdict on the ledger failed; the next probe retries", "vip", vip)
		}
		woken = &paasv1.IP{Spec: paasv1.IPSpec{Address: vip.String()}}
		a.changes.Observe(woken)
	}
	if woken == nil {
		return
	}
	select {
	case p.wake <- event.GenericEvent{Object: woken}:
	default: // a pass is asked for already
	}
}

var probesTotal = prometheus.NewCounterVec(prometheus.CounterOpts{
	Name: "vip_allocator_agent_probes_total",
	Help: "Probes of addresses before their first announcement, and rechecks of addresses in use on the LAN, by outcome: silent, or in-use (a host that is none of the cluster's nodes answered).",
}, []string{"outcome"})

func init() { metrics.Registry.MustRegister(probesTotal) }

func probeOutcome(claimed bool) string {
	if claimed {
		return "in-use"
	}
	return "silent"
}

// recordProbe writes the verdict of a probe of vip on its ledger entry, when
// it is one (probeVerdict). The patch carries the resourceVersion read (the
// conditions list is replaced whole), and a conflict reads again.
func (a *Announcer) recordProbe(ctx context.Context, vip netip.Addr, iface string, r probeResult) error {
	return retry.RetryOnConflict(retry.DefaultBackoff, func() error {
		var ip paasv1.IP
		if err := a.Client.Get(ctx, client.ObjectKey{Name: paasv1.IPObjectName(vip)}, &ip); err != nil {
			return client.IgnoreNotFound(err)
		}
		c := probeVerdict(&ip, vip, a.NodeName, iface, r)
		if c == nil {
			return nil
		}
		patch := client.MergeFromWithOptions(ip.DeepCopy(), client.MergeFromWithOptimisticLock{})
		meta.SetStatusCondition(&ip.Status.Conditions, *c)
		if err := a.Client.Status().Patch(ctx, &ip, patch); err != nil {
			return fmt.Errorf("record %s %s on %s: %w", paasv1.IPConditionInUseOnLAN, c.Status, ip.Name, err)
		}
		if c.Status == metav1.ConditionTrue {
			ctrl.LoggerFrom(ctx).Info("address in use on the LAN: not announced", "vip", vip, "mac", r.mac.String(), "interface", iface)
		}
		return nil
	})
}

// markProbed adds to ip, about to be claimed by this node, the silent
// probe's verdict that preceded its first announcement (claimCondition).
func (a *Announcer) markProbed(ip *paasv1.IP, vip netip.Addr) {
	if a.probes == nil {
		return
	}
	a.probes.mu.Lock()
	r := a.probes.results[vip]
	a.probes.mu.Unlock()
	if c := claimCondition(ip, a.NodeName, r, a.probes.cfg.Tries > 0); c != nil {
		meta.SetStatusCondition(&ip.Status.Conditions, *c)
	}
}

// noteInUse keeps in s the ledger entry of vip (nil: none) when a host on the
// LAN uses its address, with the candidacy of its group, for its rechecks.
func (s *store) noteInUse(vip netip.Addr, entry *paasv1.IP) {
	if s.lanInUse == nil {
		s.lanInUse = map[netip.Addr]lanRecord{}
	}
	delete(s.lanInUse, vip)
	if entry == nil {
		return
	}
	if _, inUse := entry.InUseOnLAN(); !inUse {
		return
	}
	g := groupOf(entry, s.groups)
	if g == nil || election.ModeOf(g) != paasv1.AnnounceL2 {
		return
	}
	if c, ok := election.CandidacyOfLedger(g, entry); ok {
		s.lanInUse[vip] = lanRecord{ip: entry, c: c}
	}
}
