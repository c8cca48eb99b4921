package l2

import (
	"net"
	"time"

	"golang.org/x/time/rate"
)

// A LAN neighbour can send any number of packets claiming a VIP this node owns,
// each from a new MAC. Looking at a claim costs something (is the MAC one of
// our nodes'? a report to the API server), so claims pass a gate first whose
// cost and memory are bounded whatever arrives: a fixed-size record per VIP of
// the MACs looked at lately, then a rate limit per VIP, then one for the whole
// speaker. Questions (ARP requests, Neighbor Solicitations) never pass it: the
// VIP keeps answering its clients under a flood of claims.
const (
	// claimRecheck is how long a MAC looked at for a VIP is not looked at
	// again for it: a claimant is reported at most this often.
	claimRecheck = time.Minute
	// claimantsPerVIP bounds the record of MACs looked at, per VIP; the
	// least recently looked at is forgotten first.
	claimantsPerVIP = 16
	// Claims looked at per VIP: a second announcer or a host holding the
	// address is seen within a second, a flood costs one look a second.
	claimsPerVIPPerSecond = 1
	claimsPerVIPBurst     = 4
	// Claims looked at for all VIPs of the speaker together.
	claimsPerSecond = 10
	claimsBurst     = 20
)

// claimants is one VIP's side of the gate: its rate limit and the MACs it
// looked at lately. Its size is fixed; it lives as long as the VIP is owned.
type claimants struct {
	limit  *rate.Limiter
	recent [claimantsPerVIP]claimant
}

type claimant struct {
	mac string // the MAC's bytes; "" for a free slot
	at  time.Time
}

func newClaimants() *claimants {
	return &claimants{limit: rate.NewLimiter(claimsPerVIPPerSecond, claimsPerVIPBurst)}
}

// admit reports whether a claim of the VIP by mac, heard at now, is worth a
// look, and if so records mac as looked at. global is the speaker-wide limit.
// A MAC looked at within claimRecheck costs no token.
func (c *claimants) admit(mac net.HardwareAddr, now time.Time, global *rate.Limiter) bool {
	oldest := 0
	for i := range c.recent {
		r := &c.recent[i]
		if r.mac == string(mac) && now.Sub(r.at) < claimRecheck {
			return false
		}
		if c.recent[oldest].mac != "" && (r.mac == "" || r.at.Before(c.recent[oldest].at)) {
			oldest = i // a free slot, else the least recently looked at
		}
	}
	if !c.limit.AllowN(now, 1) || !global.AllowN(now, 1) {
		return false
	}
	c.recent[oldest] = claimant{mac: string(mac), at: now}
	return true
}
