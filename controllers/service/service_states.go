package service

import (
	"context"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/lbclass"
)

// The Services waiting for something, read from their conditions at each
// scrape: what an alert needs ("pending for 15 minutes") and a counter of
// failures cannot say, since it counts changes, not waits.
var (
	servicesPendingDesc = prometheus.NewDesc("vip_allocator_services_pending",
		"Services the operator serves whose condition vip.paas.org/IPAllocated is False, by reason.", []string{"reason"}, nil)
	servicesPendingSecondsDesc = prometheus.NewDesc("vip_allocator_services_pending_seconds",
		"How long the Service pending longest (IPAllocated False) has been pending, by reason.", []string{"reason"}, nil)
	servicesUnannouncedDesc = prometheus.NewDesc("vip_allocator_services_unannounced",
		"Services holding an address no node announces (condition vip.paas.org/Announced False).", nil, nil)
	servicesUnannouncedSecondsDesc = prometheus.NewDesc("vip_allocator_services_unannounced_seconds",
		"How long the Service unannounced longest (Announced False) has been so.", nil, nil)
)

// serviceStates reports those from the manager's cache, and only on the
// leader (the other replicas would report the same, or nothing while their
// cache is cold); the Service controller sets its source when it starts.
var serviceStates = &serviceStateCollector{}

func init() { metrics.Registry.MustRegister(serviceStates) }

type serviceStateSource struct {
	reader       client.Reader
	ownClassOnly bool
	leading      <-chan struct{}
}

type serviceStateCollector struct {
	source atomic.Pointer[serviceStateSource]
	now    func() time.Time // tests
}

func (c *serviceStateCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- servicesPendingDesc
	ch <- servicesPendingSecondsDesc
	ch <- servicesUnannouncedDesc
	ch <- servicesUnannouncedSecondsDesc
}

func (c *serviceStateCollector) Collect(ch chan<- prometheus.Metric) {
	src := c.source.Load()
	if src == nil {
		return
	}
	select {
	case <-src.leading:
	default:
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var list corev1.ServiceList
	if err := src.reader.List(ctx, &list, client.UnsafeDisableDeepCopy); err != nil {
		ctrl.Log.WithName("metrics").Error(err, "list Services for the pending and unannounced counts")
		return
	}
	now := time.Now()
	if c.now != nil {
		now = c.now()
	}
	s := summarizeServices(list.Items, src.ownClassOnly, now)
	for reason, w := range s.pending {
		ch <- prometheus.MustNewConstMetric(servicesPendingDesc, prometheus.GaugeValue, float64(w.count), reason)
		ch <- prometheus.MustNewConstMetric(servicesPendingSecondsDesc, prometheus.GaugeValue, w.longest.Seconds(), reason)
	}
	ch <- prometheus.MustNewConstMetric(servicesUnannouncedDesc, prometheus.GaugeValue, float64(s.unannounced.count))
	ch <- prometheus.MustNewConstMetric(servicesUnannouncedSecondsDesc, prometheus.GaugeValue, s.unannounced.longest.Seconds())
}

// waiting is how many Services wait, and the longest wait.
type waiting struct {
	count   int
	longest time.Duration
}

func (w *waiting) add(since metav1.Time, now time.Time) {
	w.count++
	w.longest = max(w.longest, now.Sub(since.Time))
}

type serviceSummary struct {
	pending     map[string]*waiting // by IPAllocated reason
	unannounced waiting
}

// summarizeServices counts the served Services whose IPAllocated or Announced
// condition is False, each wait from the condition's last transition.
func summarizeServices(svcs []corev1.Service, ownClassOnly bool, now time.Time) serviceSummary {
	s := serviceSummary{pending: map[string]*waiting{}}
	for i := range svcs {
		svc := &svcs[i]
		if !lbclass.Handles(svc, ownClassOnly) || !svc.DeletionTimestamp.IsZero() {
			continue
		}
		if c := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionIPAllocated); c != nil && c.Status == metav1.ConditionFalse {
			w := s.pending[c.Reason]
			if w == nil {
				w = &waiting{}
				s.pending[c.Reason] = w
			}
			w.add(c.LastTransitionTime, now)
		}
		if c := meta.FindStatusCondition(svc.Status.Conditions, paasv1.ConditionAnnounced); c != nil && c.Status == metav1.ConditionFalse {
			s.unannounced.add(c.LastTransitionTime, now)
		}
	}
	return s
}
