package cmd

import (
	"flag"
	"fmt"

	"github.com/redhat-cop/operator-utils/pkg/util"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers"
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
	fs.BoolVar(&o.OwnClassOnly, "own-class-only", false, "serve only Services with spec.loadBalancerClass "+controllers.LoadBalancerClass+" (to coexist with another load-balancer implementation)")
	fs.IntVar(&o.Workers, "workers", 8, "Services reconciled concurrently")
	fs.Float64Var(&o.QPS, "kube-api-qps", 200, "API requests per second the operator may make")
	fs.IntVar(&o.Burst, "kube-api-burst", 400, "API request burst")
	zapOpts := zap.Options{}
	zapOpts.BindFlags(fs)
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctrl.SetLogger(zap.New(zap.UseFlagOptions(&zapOpts)))

	loading := clientcmd.NewDefaultClientConfigLoadingRules()
	loading.ExplicitPath = o.Kubeconfig
	cfg, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(loading, nil).ClientConfig()
	if err != nil {
		return fmt.Errorf("load kubeconfig: %w", err)
	}
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst

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
		LeaderElectionNamespace:       o.LeaderNamespace,
		LeaderElectionReleaseOnCancel: true,
		// The cache keeps what the reconcilers read; managed fields are most of
		// an object's size and nobody here reads them.
		Cache: cache.Options{DefaultTransform: cache.TransformStripManagedFields()},
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
	if err := (&controllers.ServiceReconciler{ReconcilerBase: base("vip-allocator"), OwnClassOnly: o.OwnClassOnly, Workers: o.Workers, LeaderElection: o.LeaderElect}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up Service controller: %w", err)
	}
	if err := (&controllers.IPGroupReconciler{ReconcilerBase: base("vip-allocator")}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up IPGroup controller: %w", err)
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}
