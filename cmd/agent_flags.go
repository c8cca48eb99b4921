package cmd

import (
	"cmp"
	"fmt"
	"os"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/agentfacts"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/metricsauth"
	"github.com/paas-org/vip-allocator-operator/internal/returnplan"
	"github.com/paas-org/vip-allocator-operator/nodeagent"
	"github.com/paas-org/vip-allocator-operator/nodeagent/announce"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
	"github.com/paas-org/vip-allocator-operator/nodeagent/gossip"
)

// rawAgentFlags are the agent's flags that are not fields of its Config.
type rawAgentFlags struct {
	kubeconfig, context, onCordon *string
	qps                           *float64
	burst                         *int
}

// agentFlags is the agent's flag set, bound to c and to the returned raw flags.
func agentFlags(c *nodeagent.Config) (*pflag.FlagSet, *rawAgentFlags) {
	fs := pflag.NewFlagSet("agent", pflag.ContinueOnError)
	raw := &rawAgentFlags{kubeconfig: new(string), context: new(string)}
	bindKubeFlags(fs, raw.kubeconfig, raw.context)
	fs.StringVar(&c.NodeName, "node-name", "", "the node this agent runs on (required)")
	fs.BoolVar(&c.OwnClassOnly, "own-class-only", false, "serve only Services of class "+paasv1.LoadBalancerClass+" (as the operator's flag)")
	fs.DurationVar(&c.ResyncPeriod, "resync-period", time.Minute, "rewrite every rule this often (repairs drift)")
	fs.DurationVar(&c.CheckPeriod, "check-period", 5*time.Second, "check the canary chain and jump rules this often")
	fs.IntVar(&c.MasqueradeBit, "masquerade-bit", 21, "bit of the packet mark that asks for masquerading (kube-proxy uses 14)")
	fs.StringVar(&c.Plane, "dataplane", dataplane.PlaneAuto, "what programs the VIPs: nftables (a table of our own, written through netlink), iptables (iptables-restore, the node's backend) or auto (nftables when the kernel takes it, else iptables)")
	fs.StringVarP(&c.Namespace, "namespace", "n", cmp.Or(os.Getenv("POD_NAMESPACE"), paasv1.DefaultNamespace), "namespace of the operator, which holds the agents' gossip key Secret")
	fs.IntVar(&c.MemberlistPort, "memberlist-port", paasv1.AgentMemberlistPort, "UDP and TCP port of the agents' liveness gossip")
	fs.StringVar(&c.BindAddress, "bind-address", "", "this node's address for the liveness gossip; empty: the Node's InternalIP")
	fs.DurationVar(&c.HandoverDelay, "handover-delay", 2*time.Second, "how long a VIP this node hands over is still answered for, so the new owner's gratuitous ARP comes first")
	fs.IntVar(&c.FailoverHistory, "failover-history", announce.DefaultHistoryLimit, fmt.Sprintf("how many ownership changes of an L2 VIP (advertiser changes of a BGP VIP) its IP object keeps in status.history (1 to %d)", announce.MaxHistoryLimit))
	fs.DurationVar(&c.BGPGracefulShutdown, "bgp-graceful-shutdown", 5*time.Second, "how long the BGP routes of VIPs this node stops advertising (cordon, drain, exclusion, a stop that hands over) are still advertised with the GRACEFUL_SHUTDOWN community (65535:0; LOCAL_PREF 0 to iBGP peers) before they are withdrawn, so the routers move the traffic to the other nodes first; 0 withdraws at once")
	fs.StringVar(&c.OnStop, "on-stop", nodeagent.OnStopAuto, "what stopping the agent does to its VIPs: handover (the others take them over first), restart (they stay: the agent is back soon) or auto (handover when the node is cordoned, deleted or not Ready, else restart)")
	raw.onCordon = fs.String("on-cordon", string(election.OnCordonHandover), "what cordoning a node does to its VIPs: handover (they move to other nodes, a planned move) or keep (they stay; only the label "+corev1.LabelNodeExcludeBalancers+", a drain that stops the agent, or the node's death moves them). The operator sets it to its own --on-cordon")
	fs.StringVar(&c.LivenessTimers, "liveness-timers", gossip.TimersTuned, "failure-detection timers of the agents' gossip: tuned (a dead node is noticed in about a second) or lan (memberlist's defaults, about five seconds)")
	fs.DurationVar(&c.ARPProbePeriod, "arp-probe-period", 10*time.Second, "how often each owned VIP is probed for another host claiming it; 0 disables")
	// The operator parses its --agent-args with these same flags (CheckAgentArgs).
	fs.IntVar(&c.Probe.Tries, "new-address-probes", 3, "probes (ARP probe, IPv6 duplicate address detection) the L2 owner sends for an address never announced before announcing it; a host that answers has the address, which is then never announced (IP condition InUseOnLAN); 0 announces at once")
	fs.DurationVar(&c.Probe.Interval, "new-address-probe-interval", 330*time.Millisecond, "time between those probes, and after the last one for its answer")
	fs.DurationVar(&c.Probe.Recheck, "new-address-recheck", 5*time.Minute, "how often the L2 owner of an address found in use on the LAN probes it again; silence clears the verdict")
	fs.DurationVar(&c.GossipKeyPoll, "gossip-key-poll", 30*time.Second, "how often the gossip key Secret is read for a key rotation step")
	fs.BoolVar(&c.ConnectionHandoff, "connection-handoff", true, "after a planned move of a VIP to this node, send the TCP segments of connections the previous owner still holds on to it, so they survive the move")
	fs.BoolVar(&c.ReturnPaths, "return-paths", true, "send the replies to a VIP back by the interface its requests came in on, to that network's router (connection marks and policy routing of the agent's own); false: by the main routing table")
	fs.UintVar(&c.ReturnLayout.MarkShift, "return-mark-shift", returnplan.DefaultLayout.MarkShift, "first of the four packet mark bits the ways back use (--return-paths); move them off bits another system uses (Calico's mark mask, Cilium's identity marks)")
	fs.IntVar(&c.ReturnLayout.TableBase, "return-table-base", returnplan.DefaultLayout.TableBase, fmt.Sprintf("the ways back use the routing tables after this one (%d of them; this one records the interfaces whose src_valid_mark the agent turned on)", returnplan.MaxPaths))
	raw.qps = fs.Float64("kube-api-qps", 20, "requests per second to the API server (ledger and BGPPeer status writes; reads come from the cache)")
	// The burst is a node's claims when it comes to own many VIPs at once (a
	// batch of new Services, a failover): bounded by those VIPs, not by time,
	// so they need not trail behind the sustained rate.
	raw.burst = fs.Int("kube-api-burst", 400, "burst of requests to the API server")
	fs.StringVar(&c.MetricsAddr, "metrics-bind-address", "", fmt.Sprintf("Prometheus metrics (and %s) address; empty: the Node's InternalIP, port %d (not every network the node is on); 0 disables", agentfacts.Path, paasv1.AgentMetricsPort))
	fs.StringVar(&c.PprofAddr, "pprof-bind-address", "", "Go pprof address, for profiling; empty disables")
	fs.BoolVar(&c.MetricsSecure, "metrics-secure", true, "serve metrics over TLS to callers allowed to get /metrics (ClusterRole "+metricsauth.ReaderClusterRole+"); false: plain HTTP to anyone on the node's networks")
	fs.StringVar(&c.ProbeAddr, "health-probe-bind-address", fmt.Sprintf("127.0.0.1:%d", paasv1.AgentProbePort), "healthz/readyz address (the kubelet probes the host network's loopback); 0 disables")
	fs.StringVar(&c.DaemonSet, "daemonset", "", "namespace/name of the DaemonSet that runs this agent: on stop, remove the rules when it is gone (uninstall) and keep them otherwise (restart); empty: always keep")
	return fs, raw
}

// complete validates the parsed flags and reads the raw ones into c.
func (raw *rawAgentFlags) complete(c *nodeagent.Config) error {
	if c.FailoverHistory < 1 || c.FailoverHistory > announce.MaxHistoryLimit {
		return fmt.Errorf("--failover-history %d: want 1 to %d", c.FailoverHistory, announce.MaxHistoryLimit)
	}
	if c.Probe.Tries < 0 {
		return fmt.Errorf("--new-address-probes %d: want 0 (announce at once) or more", c.Probe.Tries)
	}
	if err := c.ReturnLayout.Validate(c.MasqueradeBit); err != nil {
		return fmt.Errorf("--return-mark-shift, --return-table-base: %w", err)
	}
	onCordonPolicy, err := election.ParseOnCordon(*raw.onCordon)
	if err != nil {
		return fmt.Errorf("--on-cordon %w", err)
	}
	c.OnCordon = onCordonPolicy
	return nil
}
