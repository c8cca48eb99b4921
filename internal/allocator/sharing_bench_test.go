package allocator

import (
	"errors"
	"fmt"
	"net/netip"
	"slices"
	"testing"
	"time"
)

// sharingRound is one allocation of every Service of a cluster, as a resync
// reconciles them one after another under the allocator's lock: ordinary
// Services (one in two sharing an address with a partner) and, when pair is
// set, a sharing pair of pairPorts ports each on one address.
type sharingRound struct {
	a    *Allocator
	keys []string
	reqs []Request
}

// newSharingRound builds the allocator with n ordinary Services and the pair,
// each already holding its address. A pair past MaxSharedPorts is imported
// as the rebuild imports what the ledger recorded: nothing else puts it there.
func newSharingRound(tb testing.TB, n, pairPorts int) *sharingRound {
	g, err := NewGroup(Group{Name: "g", Segment: netip.MustParsePrefix("10.0.0.0/16"), AutoAssign: true})
	if err != nil {
		tb.Fatal(err)
	}
	r := &sharingRound{a: New()}
	r.a.SetGroups([]*Group{g})
	for i := range n {
		req := Request{Families: v4}
		if i%2 == 0 {
			req.Sharing = dnsSharing("ns", fmt.Sprint("k", i/4), Port{Protocol: "TCP", Port: int32(80 + i%4)}, Port{Protocol: "UDP", Port: int32(53 + i%4)})
		}
		r.keys, r.reqs = append(r.keys, fmt.Sprint("ns/s", i)), append(r.reqs, req)
	}
	for i, key := range r.keys {
		if _, err := r.a.Allocate(key, r.reqs[i]); err != nil {
			tb.Fatal(err)
		}
	}
	if pairPorts == 0 {
		return r
	}
	pair := netip.MustParseAddr("10.0.255.1")
	for i := range 2 {
		key := fmt.Sprint("tenant/pair", i)
		req := Request{Families: v4, Sharing: dnsSharing("tenant", "pair", portRange("TCP", 1+i*pairPorts, pairPorts)...)}
		if 2*pairPorts > MaxSharedPorts {
			r.a.SetSharing(key, req.Sharing)
			if err := r.a.Assign(key, pair); err != nil {
				tb.Fatal(err)
			}
		} else if _, err := r.a.Allocate(key, Request{Families: v4, IPs: []netip.Addr{pair}, Sharing: req.Sharing}); err != nil {
			tb.Fatal(err)
		}
		r.keys, r.reqs = append(r.keys, key), append(r.reqs, req)
	}
	return r
}

// run allocates every Service once; only a pair past the bound may fail, and
// only for that reason.
func (r *sharingRound) run(tb testing.TB) time.Duration {
	start := time.Now()
	for i, key := range r.keys {
		if _, err := r.a.Allocate(key, r.reqs[i]); err != nil && !errors.Is(err, ErrSharedTooManyPorts) {
			tb.Fatalf("%s: %v", key, err)
		}
	}
	return time.Since(start)
}

// BenchmarkSharingHostilePair measures one round over 1,000 ordinary
// Services alone (baseline), with a hostile pair of 30,000 ports each on one
// address, and with the largest pair admitted (2,048 ports each). The three
// rounds alternate in one loop, each first in turn, and the figures are
// medians of each loop's rounds and ratios, so a busy machine slows all three
// alike:
//
//	go test ./internal/allocator -run '^$' -bench BenchmarkSharingHostilePair -benchtime 300x
func BenchmarkSharingHostilePair(b *testing.B) {
	rounds := []*sharingRound{newSharingRound(b, 1000, 0), newSharingRound(b, 1000, 30000), newSharingRound(b, 1000, MaxSharedPorts/2)}
	took := make([][]float64, len(rounds))
	var ratios [2][]float64
	i := 0
	for b.Loop() {
		this := make([]float64, len(rounds))
		for j := range rounds {
			k := (i + j) % len(rounds)
			this[k] = float64(rounds[k].run(b).Nanoseconds())
			took[k] = append(took[k], this[k])
		}
		ratios[0] = append(ratios[0], this[1]/this[0])
		ratios[1] = append(ratios[1], this[2]/this[0])
		i++
	}
	b.ReportMetric(median(took[0]), "baseline-ns/round")
	b.ReportMetric(median(took[1]), "hostile30000-ns/round")
	b.ReportMetric(median(took[2]), "largest2048-ns/round")
	b.ReportMetric(median(ratios[0]), "hostile/baseline")
	b.ReportMetric(median(ratios[1]), "largest/baseline")
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	return s[len(s)/2]
}

// TestSharingHostilePairSmoke runs the benchmark's rounds at a small size, so
// that its setup cannot rot.
func TestSharingHostilePairSmoke(t *testing.T) {
	for _, pairPorts := range []int{0, 30000, MaxSharedPorts / 2} {
		newSharingRound(t, 20, pairPorts).run(t)
	}
}
