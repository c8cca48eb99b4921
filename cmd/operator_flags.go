package cmd

import (
	"encoding/json"
	"fmt"
	"net/netip"
	"os"
	"runtime/debug"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/internal/election"
	"github.com/paas-org/vip-allocator-operator/internal/metricsauth"
	"github.com/paas-org/vip-allocator-operator/migration"
)

// rawOperatorFlags are the operator's flags that need parsing beyond their
// type before they become OperatorOptions.
type rawOperatorFlags struct {
	serviceCIDRs, nodeSelector, agentFlags, onCordon, tolerations *string
}

// operatorFlags defines the operator's flags on fs, into o and the returned raw values.
func operatorFlags(fs *pflag.FlagSet, o *OperatorOptions) rawOperatorFlags {
	var r rawOperatorFlags
	bindKubeFlags(fs, &o.Kubeconfig, &o.Context)
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect one active operator among replicas (a Lease)")
	fs.StringVar(&o.LeaderNamespace, "leader-election-namespace", "", "namespace of the leader Lease; empty: the operator's own namespace")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8443", "Prometheus metrics address; 0 disables")
	fs.BoolVar(&o.MetricsSecure, "metrics-secure", true, "serve metrics over TLS to callers allowed to get /metrics (ClusterRole "+metricsauth.ReaderClusterRole+"); false: plain HTTP to anyone")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "healthz/readyz address")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "", "Go pprof address, for profiling; empty disables")
	fs.BoolVar(&o.OwnClassOnly, "own-class-only", false, "serve only Services with spec.loadBalancerClass "+paasv1.LoadBalancerClass+" (to coexist with another load-balancer implementation)")
	// A reconcile spends its time waiting for its two writes, one after the
	// other; the API server serves many at once, so Services go through at the
	// API server's pace only with about as many in flight as a plain client
	// needs to reach it (make bench-alloc's baseline keeps 32). Workers cost a goroutine.
	fs.IntVar(&o.Workers, "workers", DefaultWorkers, "Services reconciled concurrently")
	// client-go keeps one limiter per resource type: ledger creates and Service
	// status patches each get QPS, one request of each per allocation. 1000 is
	// above the rate at which an API server takes those two writes (the
	// baseline of make bench-alloc, docs/performance.md), so the API server sets
	// the pace, and its priority and fairness protects it; the limit only caps a
	// runaway loop.
	fs.Float64Var(&o.QPS, "kube-api-qps", DefaultQPS, "API requests per second the operator may make, per resource type")
	fs.IntVar(&o.Burst, "kube-api-burst", DefaultBurst, "API request burst, per resource type")
	fs.StringVar(&o.IPMode, "ip-mode", "Proxy", "ipMode written to Service ingress: Proxy (the vip-allocator agent forwards VIP traffic) or VIP (kube-proxy or the CNI does, and the agent programs nothing)")
	fs.DurationVar(&o.ReleasedGrace, "released-address-grace", service.DefaultReleasedAddressGrace, "how long an address a Service asked for by name (spec.loadBalancerIP, vip.paas.org/ips) stays kept for that namespace/name after the Service is deleted or stops being a LoadBalancer, so that deleting and creating it again gets the address back before another Service waiting for it; 0 keeps none")
	fs.BoolVar(&o.AdmissionPolicies, "admission-policies", false, "check that the admission policies (ledger writers, the agents' own-node writes, ...) are in force for the operator's namespace, and report any missing or altered (Event, metric); for OLM installs, whose bundle cannot carry them: an administrator applies deploy/admission-policies.yaml (deploy/bundle.yaml carries them)")
	fs.StringVarP(&o.Agent.Namespace, "namespace", "n", os.Getenv("POD_NAMESPACE"), "namespace of the operator and the agent DaemonSet ($POD_NAMESPACE)")
	fs.StringVar(&o.Agent.Image, "agent-image", "", "agent image; empty: the operator's own image (read from its pod, $POD_NAME)")
	// Not --workers: a migration makes several dependent writes to the same
	// Service and VirtualIP, and with many at once each waits longer in its last
	// step, so a large batch takes longer (make bench-migrate, docs/performance.md).
	fs.IntVar(&o.Migration.Workers, "migration-workers", 8, "legacy VirtualIP migrations reconciled concurrently")
	fs.DurationVar(&o.Migration.CutoverDelay, "migration-cutover-delay", migration.DefaultCutoverDelay, "how long a migrated Service holds its IP through the new data path before the legacy keepalived clone Service is deleted")
	fs.DurationVar(&o.Migration.CutoverDelay, "migration-handover-delay", migration.DefaultCutoverDelay, "deprecated: the former name of --migration-cutover-delay")
	r.serviceCIDRs = fs.String("service-cidrs", "", "Service CIDRs never handed out, comma-separated (e.g. 10.96.0.0/12,fd00:10:96::/112): for clusters whose API server serves no networking.k8s.io/v1 ServiceCIDR objects (before Kubernetes 1.33), or in addition to them")
	r.nodeSelector = fs.String("agent-node-selector", "", "node selector of the agent DaemonSet, as key=value,key2=value2")
	r.agentFlags = fs.String("agent-args", "", `flags added to every agent, separated by spaces, e.g. "--dataplane=iptables --liveness-timers=lan" (see vip-allocator agent -h)`)
	r.onCordon = fs.String("on-cordon", string(election.OnCordonHandover), "what cordoning a node does to its VIPs: handover (they move to other nodes, a planned move, without losing a request) or keep (they stay, as MetalLB does; the label "+corev1.LabelNodeExcludeBalancers+" still moves them). Passed on to the agents")
	r.tolerations = fs.String("agent-tolerations", "", `tolerations of the agent DaemonSet as JSON, e.g. [{"key":"role","operator":"Equal","value":"edge","effect":"NoSchedule"}]; empty tolerates every taint`)
	return r
}

// complete validates the flags and parses the raw ones into o.
func (r rawOperatorFlags) complete(o *OperatorOptions) error {
	if o.ReleasedGrace < 0 {
		return fmt.Errorf("--released-address-grace must not be negative, not %s", o.ReleasedGrace)
	}
	if o.IPMode != string(corev1.LoadBalancerIPModeProxy) && o.IPMode != string(corev1.LoadBalancerIPModeVIP) {
		return fmt.Errorf("--ip-mode must be Proxy or VIP, not %q", o.IPMode)
	}
	for _, s := range strings.Split(*r.serviceCIDRs, ",") {
		if s = strings.TrimSpace(s); s == "" {
			continue
		}
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return fmt.Errorf("--service-cidrs: %q is not a CIDR: %w", s, err)
		}
		o.ServiceCIDRs = append(o.ServiceCIDRs, p.Masked())
	}
	if *r.nodeSelector != "" {
		sel, err := labels.ConvertSelectorToLabelsMap(*r.nodeSelector)
		if err != nil {
			return fmt.Errorf("--agent-node-selector: %w", err)
		}
		o.Agent.NodeSelector = sel
	}
	if *r.tolerations != "" {
		if err := json.Unmarshal([]byte(*r.tolerations), &o.Agent.Tolerations); err != nil {
			return fmt.Errorf("--agent-tolerations: %w", err)
		}
	}
	onCordonPolicy, err := election.ParseOnCordon(*r.onCordon)
	if err != nil {
		return fmt.Errorf("--on-cordon %w", err)
	}
	o.Agent.OnCordon = onCordonPolicy
	extra, err := agent.ParseArgs(*r.agentFlags)
	if err != nil {
		return fmt.Errorf("--agent-args: %w", err)
	}
	if _, err := checkAgentArgs(extra); err != nil {
		return fmt.Errorf("--agent-args: %w", err)
	}
	o.Agent.ExtraArgs = extra

	return nil
}

// tuneRuntime sets the Go runtime and client-go defaults the operator runs best with.
func tuneRuntime() {
	// The operator's live heap is mostly its informer caches; Go's default
	// GOGC=100 lets the heap grow to twice that between collections, which
	// the RSS target (100 MiB at 3,000 Services) does not leave room for,
	// while a low GOGC spends on collection CPU that the API server, sharing
	// the machine, needs to keep pace. 75 keeps the RSS under the target at
	// the least CPU per allocation (make bench-alloc; each value's figures in
	// docs/performance.md). $GOGC overrides it.
	if os.Getenv("GOGC") == "" {
		debug.SetGCPercent(75)
	}
	// client-go's streaming initial list (WatchListClient) waits for the API
	// server to confirm its watch cache is current before the first objects
	// count as synced, and nothing allocates before the caches sync: plain
	// paged lists give the first IP sooner after a start (make bench-alloc,
	// docs/performance.md). $KUBE_FEATURE_WatchListClient overrides it.
	if _, set := os.LookupEnv(watchListGate); !set {
		_ = os.Setenv(watchListGate, "false")
	}
}
