package cmd

import (
	"cmp"
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"time"

	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/nodeagent"
	"github.com/paas-org/vip-allocator-operator/nodeagent/dataplane"
	"github.com/paas-org/vip-allocator-operator/nodeagent/membership"
)

func runAgent(args []string) error {
	if len(args) > 0 && args[0] == "cleanup" {
		return runAgentCleanup(args[1:])
	}
	fs := flag.NewFlagSet("agent", flag.ContinueOnError)
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig file; empty: in-cluster config, or $KUBECONFIG")
	var o nodeagent.Options
	fs.StringVar(&o.NodeName, "node-name", "", "the node this agent runs on (required)")
	fs.BoolVar(&o.OwnClassOnly, "own-class-only", false, "serve only Services of class "+paasv1.LoadBalancerClass+" (as the operator's flag)")
	fs.DurationVar(&o.ResyncPeriod, "resync-period", time.Minute, "rewrite every rule this often (repairs drift)")
	fs.DurationVar(&o.CheckPeriod, "check-period", 5*time.Second, "check the canary chain and jump rules this often")
	masqBit := fs.Int("masquerade-bit", 21, "bit of the packet mark that asks for masquerading (kube-proxy uses 14)")
	plane := fs.String("dataplane", dataplane.PlaneAuto, "what programs the VIPs: nftables (a table of our own, written through netlink), iptables (iptables-restore, the node's backend) or auto (nftables when the kernel takes it, else iptables)")
	var l2 l2Options
	fs.StringVar(&l2.namespace, "namespace", cmp.Or(os.Getenv("POD_NAMESPACE"), paasv1.DefaultNamespace), "namespace of the operator, which holds the agents' gossip key Secret")
	fs.IntVar(&l2.port, "memberlist-port", membership.DefaultPort, "UDP and TCP port of the agents' liveness gossip")
	fs.StringVar(&l2.bindAddress, "bind-address", "", "this node's address for the liveness gossip; empty: the Node's InternalIP")
	fs.DurationVar(&l2.handoverDelay, "handover-delay", 2*time.Second, "how long a VIP this node hands over is still answered for, so the new owner's gratuitous ARP comes first")
	fs.StringVar(&l2.onStop, "on-stop", "auto", "what stopping the agent does to its VIPs: handover (the others take them over first), restart (they stay: the agent is back soon) or auto (handover when the node is cordoned, deleted or not Ready, else restart)")
	fs.StringVar(&l2.timers, "liveness-timers", "tuned", "failure-detection timers of the agents' gossip: tuned (a dead node is noticed in about a second) or lan (memberlist's defaults, about five seconds)")
	fs.DurationVar(&l2.probePeriod, "arp-probe-period", 10*time.Second, "how often each owned VIP is probed for another host claiming it; 0 disables")
	handoff := fs.Bool("connection-handoff", true, "after a planned move of a VIP to this node, send the TCP segments of connections the previous owner still holds on to it, so they survive the move")
	qps := fs.Float64("kube-api-qps", 20, "requests per second to the API server (ledger and BGPPeer status writes; reads come from the cache)")
	burst := fs.Int("kube-api-burst", 40, "burst of requests to the API server")
	metricsAddr := fs.String("metrics-bind-address", ":9478", "Prometheus metrics address; 0 disables")
	probeAddr := fs.String("health-probe-bind-address", ":9479", "healthz/readyz address; 0 disables")
	daemonSet := fs.String("daemonset", "", "namespace/name of the DaemonSet that runs this agent: on stop, remove the rules when it is gone (uninstall) and keep them otherwise (restart); empty: always keep")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if o.NodeName == "" {
		return errors.New("agent: --node-name is required")
	}
	if _, err := nodeagent.ParseDaemonSet(*daemonSet); *daemonSet != "" && err != nil {
		return fmt.Errorf("agent: %w", err)
	}
	agent := &nodeagent.Agent{Options: o}
	for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
		p, fallback, err := dataplane.Open(dataplane.Config{Family: fam, Plane: *plane, MasqueradeBit: *masqBit})
		if err != nil {
			if fam == dataplane.IPv6 {
				ctrl.Log.Info("no IPv6 data plane on this node", "reason", err.Error())
				continue
			}
			return fmt.Errorf("agent: %w", err)
		}
		if fallback != nil {
			ctrl.Log.Info("nftables refused our ruleset: using iptables", "family", fam, "reason", fallback.Error())
		}
		ctrl.Log.Info("data plane", "family", fam, "backend", p.Backend())
		agent.Planes = append(agent.Planes, p)
	}

	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = *kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(*qps), *burst
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 Scheme(),
		Metrics:                metricsserver.Options{BindAddress: *metricsAddr},
		HealthProbeBindAddress: *probeAddr,
		Cache:                  cache.Options{DefaultTransform: slimObject},
	})
	if err != nil {
		return fmt.Errorf("create manager: %w", err)
	}
	agent.Client = mgr.GetClient()
	if err := agent.SetupWithManager(mgr); err != nil {
		return err
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return err
	}
	if *handoff {
		l2.handoff = agent.Handoff
	}
	ctx := ctrl.SetupSignalHandler()
	announcer, err := startAnnouncer(ctx, cfg, mgr, o, l2)
	if err != nil {
		return err
	}
	err = mgr.Start(ctx)
	announcer.stop()
	if err != nil || *daemonSet == "" {
		return err
	}
	return teardownIfUninstalled(cfg, *daemonSet, o.NodeName, func() {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		defer cancel()
		announcer.bgp.Stop(ctx)
	})
}

// runAgentCleanup removes every rule, chain and table any agent wrote on this node, with
// either data plane.
func runAgentCleanup(args []string) error {
	fs := flag.NewFlagSet("agent cleanup", flag.ContinueOnError)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var errs []error
	for _, fam := range []dataplane.Family{dataplane.IPv4, dataplane.IPv6} {
		if err := dataplane.CleanupAll(dataplane.Config{Family: fam}); err != nil {
			errs = append(errs, fmt.Errorf("clean up %s rules: %w", fam, err))
		}
	}
	return errors.Join(errs...)
}
