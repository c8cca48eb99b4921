package cmd

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"strings"

	"github.com/redhat-cop/operator-utils/pkg/util"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers"
	"github.com/paas-org/vip-allocator-operator/migration"
)

// OperatorOptions are the operator's flags.
type OperatorOptions struct {
	Kubeconfig      string
	LeaderElect     bool
	LeaderNamespace string
	MetricsAddr     string
	ProbeAddr       string
	PprofAddr       string
	OwnClassOnly    bool
	Workers         int
	QPS             float64
	Burst           int
	// IPMode is written to every ingress: Proxy (the agent forwards) or VIP.
	IPMode string
	// Agent configures the agent DaemonSet; an empty Agent.Namespace deploys none.
	Agent controllers.AgentOptions
	// Migration configures the legacy VirtualIP migration (OwnClassOnly and
	// Workers are taken from the flags above).
	Migration migration.Options
}

func runOperator(args []string) error {
	var o OperatorOptions
	fs := flag.NewFlagSet("operator", flag.ContinueOnError)
	fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file; empty: in-cluster config, or $KUBECONFIG")
	fs.BoolVar(&o.LeaderElect, "leader-elect", true, "elect one active operator among replicas (a Lease)")
	fs.StringVar(&o.LeaderNamespace, "leader-election-namespace", "", "namespace of the leader Lease; empty: the operator's own namespace")
	fs.StringVar(&o.MetricsAddr, "metrics-bind-address", ":8080", "Prometheus metrics address; 0 disables")
	fs.StringVar(&o.ProbeAddr, "health-probe-bind-address", ":8081", "healthz/readyz address")
	fs.StringVar(&o.PprofAddr, "pprof-bind-address", "", "Go pprof address, for profiling; empty disables")
	fs.BoolVar(&o.OwnClassOnly, "own-class-only", false, "serve only Services with spec.loadBalancerClass "+paasv1.LoadBalancerClass+" (to coexist with another load-balancer implementation)")
	fs.IntVar(&o.Workers, "workers", 8, "Services reconciled concurrently")
	fs.Float64Var(&o.QPS, "kube-api-qps", 200, "API requests per second the operator may make")
	fs.IntVar(&o.Burst, "kube-api-burst", 400, "API request burst")
	fs.StringVar(&o.IPMode, "ip-mode", "Proxy", "ipMode written to Service ingress: Proxy (the vip-allocator agent forwards VIP traffic) or VIP (kube-proxy or the CNI does, and the agent programs nothing)")
	fs.StringVar(&o.Agent.Namespace, "namespace", os.Getenv("POD_NAMESPACE"), "namespace of the operator and the agent DaemonSet ($POD_NAMESPACE)")
	fs.StringVar(&o.Agent.Image, "agent-image", "", "agent image; empty: the operator's own image (read from its pod, $POD_NAME)")
	fs.DurationVar(&o.Migration.HandoverDelay, "migration-handover-delay", migration.DefaultHandoverDelay, "how long a migrated Service holds its IP through the new data path before the legacy keepalived clone Service is deleted")
	nodeSelector := fs.String("agent-node-selector", "", "node selector of the agent DaemonSet, as key=value,key2=value2")
	agentFlags := fs.String("agent-args", "", `flags added to every agent, separated by spaces, e.g. "--dataplane=iptables --liveness-timers=lan" (see vip-allocator agent -h)`)
	tolerations := fs.String("agent-tolerations", "", `tolerations of the agent DaemonSet as JSON, e.g. [{"key":"role","operator":"Equal","value":"edge","effect":"NoSchedule"}]; empty tolerates every taint`)
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))
	if o.IPMode != string(corev1.LoadBalancerIPModeProxy) && o.IPMode != string(corev1.LoadBalancerIPModeVIP) {
		return fmt.Errorf("--ip-mode must be Proxy or VIP, not %q", o.IPMode)
	}
	if *nodeSelector != "" {
		sel, err := labels.ConvertSelectorToLabelsMap(*nodeSelector)
		if err != nil {
			return fmt.Errorf("--agent-node-selector: %w", err)
		}
		o.Agent.NodeSelector = sel
	}
	if *tolerations != "" {
		if err := json.Unmarshal([]byte(*tolerations), &o.Agent.Tolerations); err != nil {
			return fmt.Errorf("--agent-tolerations: %w", err)
		}
	}
	extra, err := agentArgs(*agentFlags)
	if err != nil {
		return fmt.Errorf("--agent-args: %w", err)
	}
	o.Agent.ExtraArgs = extra

	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	if o.Agent.Namespace != "" && o.Agent.Image == "" {
		if o.Agent.Image, err = ownImage(cfg, o.Agent.Namespace, os.Getenv("POD_NAME")); err != nil {
			return fmt.Errorf("find the agent image (or pass --agent-image): %w", err)
		}
	}

	mgr, err := NewManager(cfg, o)
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// Scheme knows the built-in kinds and ours.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	must(clientgoscheme.AddToScheme(s))
	must(paasv1.AddToScheme(s))
	return s
}

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// NewManager builds the operator's manager with every controller registered.
// Tests and benchmarks call it with their own rest config.
func NewManager(cfg *rest.Config, o OperatorOptions) (ctrl.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        Scheme(),
		Metrics:                       metricsserver.Options{BindAddress: o.MetricsAddr},
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              "vip-allocator-operator.paas.org",
		LeaderElectionNamespace:       cmp.Or(o.LeaderNamespace, o.Agent.Namespace),
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{DefaultTransform: slimObject,
			// Secrets only in the operator's namespace, the only ones it may read.
			ByObject: map[client.Object]cache.ByObject{&corev1.Secret{}: {Namespaces: map[string]cache.Config{operatorNamespace(o): {}}}}},
		// Tests and benchmarks stop and start managers in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	base := func(name string) util.ReconcilerBase {
		//nolint:staticcheck // operator-utils' ReconcilerBase takes the core/v1 event recorder.
		return util.NewFromManager(mgr, mgr.GetEventRecorderFor(name))
	}
	if err := (&controllers.ServiceReconciler{ReconcilerBase: base("vip-allocator"), OwnClassOnly: o.OwnClassOnly, Workers: o.Workers, LeaderElection: o.LeaderElect,
		IPMode: corev1.LoadBalancerIPMode(o.IPMode)}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up Service controller: %w", err)
	}
	if err := (&controllers.IPGroupReconciler{ReconcilerBase: base("vip-allocator")}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up IPGroup controller: %w", err)
	}
	if err := (&controllers.BGPPeerReconciler{Client: mgr.GetClient(), Namespace: operatorNamespace(o)}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up BGPPeer controller: %w", err)
	}
	if o.Agent.Namespace != "" {
		if err := (&controllers.AgentReconciler{ReconcilerBase: base("vip-allocator"), Options: o.Agent}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up agent controller: %w", err)
		}
	}
	migrationOptions := o.Migration
	migrationOptions.OwnClassOnly, migrationOptions.Workers = o.OwnClassOnly, max(o.Workers, 1)
	if err := (&migration.Reconciler{ReconcilerBase: base("vip-allocator-migration"), Options: migrationOptions}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up migration controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// agentArgs splits --agent-args into the agents' extra flags. The operator
// sets --node-name and --daemonset itself: a second value would fight it.
func agentArgs(s string) ([]string, error) {
	args := strings.Fields(s)
	for _, a := range args {
		if !strings.HasPrefix(a, "--") {
			return nil, fmt.Errorf("%q: want flags such as --dataplane=iptables, each with its value after '='", a)
		}
		if name, _, _ := strings.Cut(a, "="); name == "--node-name" || name == "--daemonset" {
			return nil, fmt.Errorf("%s is set by the operator", name)
		}
	}
	return args, nil
}

// operatorNamespace holds the operator's Secrets: its own pod's namespace
// (--namespace), or the bundle's when it runs outside a pod.
func operatorNamespace(o OperatorOptions) string {
	return cmp.Or(o.Agent.Namespace, paasv1.DefaultNamespace)
}

// ownImage reads the operator's image from its own pod: the agent runs the same
// image, so a mirrored image needs no second setting.
func ownImage(cfg *rest.Config, namespace, pod string) (string, error) {
	if pod == "" {
		return "", errors.New("$POD_NAME is not set")
	}
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return "", err
	}
	var p corev1.Pod
	if err := c.Get(context.Background(), client.ObjectKey{Namespace: namespace, Name: pod}, &p); err != nil {
		return "", err
	}
	for _, c := range p.Spec.Containers {
		if c.Name == "operator" {
			return c.Image, nil
		}
	}
	return "", fmt.Errorf("pod %s/%s has no container named operator", namespace, pod)
}

// slimObject drops from cached objects what no reconciler reads and what makes
// up most of their size: managed fields and kubectl's last-applied copy.
func slimObject(in any) (any, error) {
	if o, ok := in.(metav1.Object); ok {
		o.SetManagedFields(nil)
		if a := o.GetAnnotations(); a[corev1.LastAppliedConfigAnnotation] != "" {
			delete(a, corev1.LastAppliedConfigAnnotation)
			o.SetAnnotations(a)
		}
	}
	// Nodes are read for labels, cordon and interfaces; their image lists
	// (often tens of KiB each) would only fill memory.
	if n, ok := in.(*corev1.Node); ok {
		n.Status.Images = nil
	}
	return in, nil
}
