package membership

import (
	"time"

	"github.com/hashicorp/memberlist"
)

// Timers are memberlist's failure-detection knobs. A zero field takes the
// tuned default (see the package comment for why each value was chosen), so
// an agent flag can change one of them and keep the rest.
type Timers struct {
	// ProbeInterval is how often each member pings one other member.
	ProbeInterval time.Duration
	// ProbeTimeout is how long a direct ping may take before indirect pings
	// (through IndirectChecks other members) and a TCP ping are tried.
	ProbeTimeout time.Duration
	// SuspicionMult sets how long a suspected member has to refute before it
	// is declared dead: SuspicionMult * max(1, log10(members)) * ProbeInterval.
	SuspicionMult int
	// SuspicionMaxTimeoutMult bounds the suspicion timeout when memberlist
	// waits for independent confirmations (only when SuspicionMult > 2).
	SuspicionMaxTimeoutMult int
	// GossipInterval is how often queued state changes (suspect, dead,
	// state updates) are sent to GossipNodes random members.
	GossipInterval time.Duration
	GossipNodes    int
	// RetransmitMult: each change is gossiped RetransmitMult * log10(members+1) times.
	RetransmitMult int
	// IndirectChecks is how many members are asked to ping a member that did
	// not answer us directly, so one lossy link does not kill a healthy node.
	IndirectChecks int
	// PushPullInterval is the full state exchange with one random member
	// (anti-entropy; memberlist stretches it with log2(members) above 32).
	PushPullInterval time.Duration
	// TCPTimeout bounds a join, a push/pull and the TCP fallback ping.
	TCPTimeout time.Duration
}

// TunedTimers are the defaults: a dead member is declared dead by every
// other member in about 0.6-0.9 s at 3-50 members (figures in docs/performance.md).
func TunedTimers() Timers {
	return Timers{
		ProbeInterval:           200 * time.Millisecond,
		ProbeTimeout:            100 * time.Millisecond,
		SuspicionMult:           2,
		SuspicionMaxTimeoutMult: 4,
		GossipInterval:          100 * time.Millisecond,
		GossipNodes:             4,
		RetransmitMult:          4,
		IndirectChecks:          3,
		PushPullInterval:        15 * time.Second,
		TCPTimeout:              3 * time.Second,
	}
}

// withDefaults fills every zero field from TunedTimers.
func (t Timers) withDefaults() Timers {
	d := TunedTimers()
	pick := func(v *time.Duration, def time.Duration) {
		if *v <= 0 {
			*v = def
		}
	}
	pickInt := func(v *int, def int) {
		if *v <= 0 {
			*v = def
		}
	}
	pick(&t.ProbeInterval, d.ProbeInterval)
	pick(&t.ProbeTimeout, d.ProbeTimeout)
	pickInt(&t.SuspicionMult, d.SuspicionMult)
	pickInt(&t.SuspicionMaxTimeoutMult, d.SuspicionMaxTimeoutMult)
	pick(&t.GossipInterval, d.GossipInterval)
	pickInt(&t.GossipNodes, d.GossipNodes)
	pickInt(&t.RetransmitMult, d.RetransmitMult)
	pickInt(&t.IndirectChecks, d.IndirectChecks)
	pick(&t.PushPullInterval, d.PushPullInterval)
	pick(&t.TCPTimeout, d.TCPTimeout)
	return t
}

// TimersOf reads the knobs out of a memberlist configuration, so a caller
// (the benchmark) can compare our defaults with memberlist.DefaultLANConfig.
func TimersOf(c *memberlist.Config) Timers {
	return Timers{
		ProbeInterval:           c.ProbeInterval,
		ProbeTimeout:            c.ProbeTimeout,
		SuspicionMult:           c.SuspicionMult,
		SuspicionMaxTimeoutMult: c.SuspicionMaxTimeoutMult,
		GossipInterval:          c.GossipInterval,
		GossipNodes:             c.GossipNodes,
		RetransmitMult:          c.RetransmitMult,
		IndirectChecks:          c.IndirectChecks,
		PushPullInterval:        c.PushPullInterval,
		TCPTimeout:              c.TCPTimeout,
	}
}

// applyTo writes the knobs (defaults filled in) into a memberlist configuration.
func (t Timers) applyTo(c *memberlist.Config) {
	t = t.withDefaults()
	c.ProbeInterval = t.ProbeInterval
	c.ProbeTimeout = t.ProbeTimeout
	c.SuspicionMult = t.SuspicionMult
	c.SuspicionMaxTimeoutMult = t.SuspicionMaxTimeoutMult
	c.GossipInterval = t.GossipInterval
	c.GossipNodes = t.GossipNodes
	c.RetransmitMult = t.RetransmitMult
	c.IndirectChecks = t.IndirectChecks
	c.PushPullInterval = t.PushPullInterval
	c.TCPTimeout = t.TCPTimeout
}
