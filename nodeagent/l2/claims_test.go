package l2

import (
	"crypto/rand"
	"net"
	"testing"
	"time"

	"golang.org/x/time/rate"
)

func randomMAC() net.HardwareAddr {
	mac := make(net.HardwareAddr, 6)
	_, _ = rand.Read(mac)
	mac[0] = mac[0]&^1 | 2 // unicast, locally administered
	return mac
}

// A flood of claims from random MACs is looked at no more often than the
// limits allow, and the record it leaves stays the same size.
func TestClaimGateBoundsAFlood(t *testing.T) {
	global := rate.NewLimiter(claimsPerSecond, claimsBurst)
	c := newClaimants()
	start := time.Unix(1_000_000, 0)
	admitted := 0
	// 10,000 claims a second for 30 seconds, as make bench-arpflood sends.
	for i := range 300_000 {
		now := start.Add(time.Duration(i) * 100 * time.Microsecond)
		if c.admit(randomMAC(), now, global) {
			admitted++
		}
	}
	if want := claimsPerVIPBurst + 30*claimsPerVIPPerSecond; admitted > want {
		t.Errorf("admitted %d claims of one VIP in 30 s, want at most %d", admitted, want)
	}
	if admitted < 30*claimsPerVIPPerSecond {
		t.Errorf("admitted %d claims in 30 s: the gate must still let a real claimant through about once a second", admitted)
	}
	used := 0
	for _, r := range c.recent {
		if r.mac != "" {
			used++
		}
	}
	if used != claimantsPerVIP {
		t.Errorf("record holds %d claimants, want the %d it has room for", used, claimantsPerVIP)
	}
}

// Many VIPs under a flood together stay within the speaker-wide limit.
func TestClaimGateGlobalLimit(t *testing.T) {
	global := rate.NewLimiter(claimsPerSecond, claimsBurst)
	vips := make([]*claimants, 200)
	for i := range vips {
		vips[i] = newClaimants()
	}
	start := time.Unix(1_000_000, 0)
	admitted := 0
	for i := range 100_000 { // 10 s
		now := start.Add(time.Duration(i) * 100 * time.Microsecond)
		if vips[i%len(vips)].admit(randomMAC(), now, global) {
			admitted++
		}
	}
	if want := claimsBurst + 10*claimsPerSecond; admitted > want {
		t.Errorf("admitted %d claims over 200 VIPs in 10 s, want at most %d", admitted, want)
	}
}

// One claimant is looked at once per claimRecheck, the rest of its claims are
// free; the least recently looked at is forgotten when the record is full.
func TestClaimGateRecord(t *testing.T) {
	global := rate.NewLimiter(rate.Inf, 0)
	c := newClaimants()
	mac := net.HardwareAddr{2, 0, 0, 0, 0, 0xbb}
	now := time.Unix(1_000_000, 0)
	steps := []struct {
		desc  string
		after time.Duration
		mac   net.HardwareAddr
		want  bool
	}{
		{"first claim: looked at", 0, mac, true},
		{"again at once: free", time.Millisecond, mac, false},
		{"again within the minute: free", 50 * time.Second, mac, false},
		{"another MAC: looked at", 2 * time.Second, net.HardwareAddr{2, 0, 0, 0, 0, 0xcc}, true},
		{"the first after a minute: looked at again", 9 * time.Second, mac, true},
	}
	for _, s := range steps {
		now = now.Add(s.after)
		if got := c.admit(s.mac, now, global); got != s.want {
			t.Fatalf("%s: admit = %v, want %v", s.desc, got, s.want)
		}
	}
	// Fill the record with others, a second apart (the per-VIP limit lets
	// one a second through): mac, the least recent, is forgotten and looked
	// at again.
	for range claimantsPerVIP {
		now = now.Add(time.Second)
		if !c.admit(randomMAC(), now, global) {
			t.Fatal("a new claimant a second after the last was not looked at")
		}
	}
	now = now.Add(time.Second)
	if !c.admit(mac, now, global) {
		t.Error("a claimant pushed out of the full record is not looked at again")
	}
}
