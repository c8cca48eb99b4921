//go:build envtest

package integration

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"

	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// netipIn reports whether the address s is inside the CIDR cidr.
func netipIn(s, cidr string) bool { return netip.MustParsePrefix(cidr).Contains(addr(s)) }

// moveOrder records, from watches on the Services of ns and on the ledger, the
// order of the writes of every move, and checks it: the new address's ledger
// object is created before the status shows it, and the old one is deleted only
// after the status stopped showing it. The watches come from one etcd, so the
// resourceVersions of both kinds are revisions of one sequence.
type moveOrder struct {
	cancel context.CancelFunc
	done   chan struct{}
	mu     sync.Mutex
	moves  []recordedMove
	create map[string][]int64 // ledger object name → revisions it was created at
	del    map[string][]int64 // ledger object name → revisions it was deleted at
}

type recordedMove struct {
	svc, from, to string
	at            int64
}

func recordMoves(ns string) *moveOrder {
	wc, err := client.NewWithWatch(env.AdminConfig, client.Options{Scheme: paasv1.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	ctx, cancel := context.WithCancel(context.Background())
	m := &moveOrder{cancel: cancel, done: make(chan struct{}), create: map[string][]int64{}, del: map[string][]int64{}}
	svcs, err := wc.Watch(ctx, &corev1.ServiceList{}, client.InNamespace(ns))
	Expect(err).NotTo(HaveOccurred())
	ips, err := wc.Watch(ctx, &paasv1.IPList{})
	Expect(err).NotTo(HaveOccurred())
	shown := map[string]string{}
	go func() {
		defer GinkgoRecover()
		defer close(m.done)
		defer svcs.Stop()
		defer ips.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case e := <-svcs.ResultChan():
				svc, ok := e.Object.(*corev1.Service)
				if !ok {
					continue
				}
				rv := revision(svc.ResourceVersion)
				now := ""
				if in := svc.Status.LoadBalancer.Ingress; len(in) > 0 {
					now = in[0].IP
				}
				m.mu.Lock()
				if before, seen := shown[svc.Name]; seen && before != "" && now != "" && before != now {
					m.moves = append(m.moves, recordedMove{svc: svc.Name, from: before, to: now, at: rv})
				}
				m.mu.Unlock()
				shown[svc.Name] = now
			case e := <-ips.ResultChan():
				ip, ok := e.Object.(*paasv1.IP)
				if !ok {
					continue
				}
				m.mu.Lock()
				switch e.Type {
				case "ADDED":
					m.create[ip.Name] = append(m.create[ip.Name], revision(ip.ResourceVersion))
				case "DELETED":
					m.del[ip.Name] = append(m.del[ip.Name], revision(ip.ResourceVersion))
				}
				m.mu.Unlock()
			}
		}
	}()
	return m
}

func revision(rv string) int64 {
	var n int64
	_, err := fmt.Sscan(rv, &n)
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	return n
}

// check stops the recording and returns the moves seen and any out of order.
func (m *moveOrder) check() (moves int, wrong []string) {
	m.cancel()
	<-m.done
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, mv := range m.moves {
		created := slices.ContainsFunc(m.create[mv.to], func(rv int64) bool { return rv < mv.at })
		if !created {
			wrong = append(wrong, fmt.Sprintf("%s moved %s → %s at %d before the ledger object of %s was created (%v)", mv.svc, mv.from, mv.to, mv.at, mv.to, m.create[mv.to]))
		}
		if slices.ContainsFunc(m.del[mv.from], func(rv int64) bool {
			return rv < mv.at && !slices.ContainsFunc(m.create[mv.from], func(c int64) bool { return c > rv && c < mv.at })
		}) {
			wrong = append(wrong, fmt.Sprintf("%s moved %s → %s at %d after the ledger object of %s was deleted (%v)", mv.svc, mv.from, mv.to, mv.at, mv.from, m.del[mv.from]))
		}
	}
	return len(m.moves), wrong
}

// metricValue reads a metric of the in-process operator by its ipgroup label.
func metricValue(name, ipgroup string) float64 {
	families, err := metrics.Registry.Gather()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "ipgroup" && l.GetValue() == ipgroup {
					if m.GetCounter() != nil {
						return m.GetCounter().GetValue()
					}
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return 0
}

// gauge reads a gauge of the in-process operator by one label; -1 when absent.
func gauge(name, label, value string) float64 {
	families, err := metrics.Registry.Gather()
	ExpectWithOffset(1, err).NotTo(HaveOccurred())
	for _, f := range families {
		if f.GetName() != name {
			continue
		}
		for _, m := range f.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == value {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}
