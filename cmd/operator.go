package cmd

import (
	"context"
	"fmt"
	"net/netip"
	"os"
	"time"

	"github.com/spf13/cobra"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/log/zap"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/migration"
)

// OperatorOptions are the operator's flags.
type OperatorOptions struct {
	Kubeconfig      string
	Context         string
	LeaderElect     bool
	LeaderNamespace string
	MetricsAddr     string
	MetricsSecure   bool
	ProbeAddr       string
	PprofAddr       string
	OwnClassOnly    bool
	Workers         int
	QPS             float64
	Burst           int
	// IPMode is written to every ingress: Proxy (the agent forwards) or VIP.
	IPMode string
	// ServiceCIDRs are reserved besides the ServiceCIDR objects (--service-cidrs).
	ServiceCIDRs []netip.Prefix
	// ReleasedGrace keeps an address a Service asked for by name for that
	// Service this long after it released it (--released-address-grace); 0 keeps none.
	ReleasedGrace time.Duration
	// AdmissionPolicies makes the operator check that config/admission's
	// policies are in force for its own namespace, and report those missing
	// or altered (OLM installs: a bundle cannot carry them, an administrator
	// applies them). It only reads them.
	AdmissionPolicies bool
	// AdmissionPolicyPeriod is how often they are checked (0: every minute;
	// no flag, tests shorten it).
	AdmissionPolicyPeriod time.Duration
	// Agent configures the agent DaemonSet; an empty Agent.Namespace deploys none.
	Agent agent.Options
	// Migration configures the legacy VirtualIP migration (OwnClassOnly is
	// taken from the flag above).
	Migration migration.Options
}

func newOperatorCmd(program string) *cobra.Command {
	var o OperatorOptions
	zapOpts := zap.Options{}
	c := &cobra.Command{
		Use:   "operator",
		Short: "Run the operator: IP allocation for LoadBalancer Services",
		Long: "The operator allocates an address from the IPGroups to each LoadBalancer Service, writes it to\n" +
			"the Service's status and deploys the agent DaemonSet. It runs in the cluster as a Deployment.",
		Example: examples(program,
			"operator --leader-elect", "in the cluster, as config/manager runs it",
			"operator --kubeconfig ~/.kube/config --leader-elect=false --namespace vip-allocator-operator --agent-image registry.example/vip-allocator:0.1.0",
			"outside the cluster, deploying the agents of that image"),
		Args: noArgs,
	}
	fs := c.Flags()
	raw := operatorFlags(fs, &o)
	bindZapFlags(fs, &zapOpts)
	c.RunE = func(c *cobra.Command, _ []string) error {
		if err := raw.complete(&o); err != nil {
			return usageError(c, err)
		}
		setLogger(&zapOpts)
		return runOperator(o)
	}
	return c
}

func runOperator(o OperatorOptions) error {
	tuneRuntime()
	cfg, err := loadKubeconfig(o.Kubeconfig, o.Context)
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = float32(o.QPS), o.Burst
	if o.Agent.Namespace != "" && o.Agent.Image == "" {
		c, err := client.New(cfg, client.Options{Scheme: paasv1.NewScheme()})
		if err != nil {
			return err
		}
		if o.Agent.Image, err = agent.OwnImage(context.Background(), c, o.Agent.Namespace, os.Getenv("POD_NAME")); err != nil {
			return fmt.Errorf("find the agent image (or pass --agent-image): %w", err)
		}
	}

	mgr, err := NewManager(cfg, o)
	if err != nil {
		return err
	}
	return mgr.Start(ctrl.SetupSignalHandler())
}

// watchListGate is the environment variable that sets client-go's
// WatchListClient feature gate (read once, at the first client's start).
const watchListGate = "KUBE_FEATURE_WatchListClient"

// The operator's defaults for its Service workers and its client limit (see
// their flags for why), also what tests running the operator in process use.
const (
	DefaultWorkers = 32
	DefaultQPS     = 1000
	DefaultBurst   = 2000
)
