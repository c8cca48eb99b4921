package announce

import (
	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

var (
	vipsAnnounced = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vip_allocator_agent_vips_announced",
		Help: "VIPs this node answers ARP or NDP for (as owner, or still handing over).",
	})
	agentsAlive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vip_allocator_agent_agents_alive",
		Help: "Agents this one sees alive (itself included); below half of the nodes running agents, it answers for nothing.",
	})
	ownershipChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vip_allocator_agent_ownership_changes_total",
		Help: "VIPs this node took over or handed over.",
	}, []string{"change"})
	handoffsActive = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vip_allocator_agent_connection_handoffs",
		Help: "VIPs this node took over in a planned move whose mid-stream TCP segments it sends on to the previous owner, which holds those connections.",
	})
	arpConflicts = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "vip_allocator_agent_arp_conflicts_total",
		Help: "ARP packets or IPv6 Neighbor Advertisements from a foreign MAC claiming a VIP this node announces (each MAC at most once a minute per VIP, and within the claim rate limits).",
	})
	bgpRoutes = prometheus.NewGauge(prometheus.GaugeOpts{
		Name: "vip_allocator_agent_bgp_routes",
		Help: "VIP host routes this node advertises by BGP.",
	})
	bgpSessionUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vip_allocator_agent_bgp_session_up",
		Help: "1 when this node's BGP session with the peer is Established, else 0.",
	}, []string{"peer"})
	bgpPrefixesSent = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vip_allocator_agent_bgp_prefixes_sent",
		Help: "VIP routes advertised to the peer on this node's session.",
	}, []string{"peer"})
	bfdSessionUp = prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Name: "vip_allocator_agent_bfd_session_up",
		Help: "1 when this node's BFD session with the peer is Up, else 0; absent for peers without bfd.",
	}, []string{"peer"})
	announceDecideDuration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vip_allocator_agent_announce_decide_seconds",
		Help:    "Time an announce pass takes to read (from the cache) and decide, before it writes anything, by kind: full (every VIP read and elected again: a Node, an IPGroup's spec, a BGPPeer or the liveness changed, and once a minute) or incremental (only the Services and VIPs that changed).",
		Buckets: prometheus.ExponentialBuckets(0.00005, 2, 16),
	}, []string{"kind"})
	failoverSeconds = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name:    "vip_allocator_agent_failover_seconds",
		Help:    "L2 VIPs this node took over from another node, by cause (OwnerDead, PlannedMove, Excluded, Conflict, ElectionChange): the time from when this agent noticed the change to its first gratuitous ARP or unsolicited Neighbor Advertisement for the VIP (the gap recorded in the IP's status.history).",
		Buckets: []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10},
	}, []string{"cause"})
	bfdStateChanges = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "vip_allocator_agent_bfd_state_changes_total",
		Help: "Times this node's BFD session with the peer entered a state (Up, Init, Down, AdminDown); each Down from Up reset the BGP session.",
	}, []string{"peer", "state"})
)

func init() {
	// Every cause is there from the start: increase() sees a failover's
	// first observation only on a series that existed before it.
	for _, c := range []paasv1.FailoverCause{paasv1.FailoverOwnerDead, paasv1.FailoverPlannedMove, paasv1.FailoverExcluded, paasv1.FailoverConflict, paasv1.FailoverElectionChange} {
		failoverSeconds.WithLabelValues(string(c))
	}
	metrics.Registry.MustRegister(vipsAnnounced, agentsAlive, ownershipChanges, handoffsActive, arpConflicts, bgpRoutes, bgpSessionUp, bgpPrefixesSent, bfdSessionUp, announceDecideDuration, bfdStateChanges, failoverSeconds)
}
