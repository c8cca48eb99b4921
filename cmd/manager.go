package cmd

import (
	"cmp"
	"fmt"
	"time"

	"github.com/redhat-cop/operator-utils/pkg/util"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/cache"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/healthz"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/config/admission"
	"github.com/paas-org/vip-allocator-operator/controllers/admissionpolicy"
	"github.com/paas-org/vip-allocator-operator/controllers/agent"
	"github.com/paas-org/vip-allocator-operator/controllers/bgppeer"
	"github.com/paas-org/vip-allocator-operator/controllers/ipgroup"
	"github.com/paas-org/vip-allocator-operator/controllers/lanrecord"
	"github.com/paas-org/vip-allocator-operator/controllers/nodeview"
	"github.com/paas-org/vip-allocator-operator/controllers/service"
	"github.com/paas-org/vip-allocator-operator/internal/metricsauth"
	"github.com/paas-org/vip-allocator-operator/internal/reserved"
	"github.com/paas-org/vip-allocator-operator/internal/slimcache"
	"github.com/paas-org/vip-allocator-operator/migration"
)

// NewManager builds the operator's manager with every controller registered.
// Tests and benchmarks call it with their own rest config.
func NewManager(cfg *rest.Config, o OperatorOptions) (ctrl.Manager, error) {
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                        paasv1.NewScheme(),
		Metrics:                       metricsauth.Options(o.MetricsAddr, o.MetricsSecure, ""),
		HealthProbeBindAddress:        o.ProbeAddr,
		PprofBindAddress:              o.PprofAddr,
		LeaderElection:                o.LeaderElect,
		LeaderElectionID:              "vip-allocator-operator.paas.org",
		LeaderElectionNamespace:       cmp.Or(o.LeaderNamespace, o.Agent.Namespace),
		LeaderElectionReleaseOnCancel: true,
		Cache: cache.Options{DefaultTransform: slimcache.Transform,
			// Secrets and DaemonSets only in the operator's namespace: its Role
			// there is all it has of them (controllers/rbac.go).
			ByObject: map[client.Object]cache.ByObject{
				&corev1.Secret{}:    {Namespaces: map[string]cache.Config{operatorNamespace(o): {}}},
				&appsv1.DaemonSet{}: {Namespaces: map[string]cache.Config{operatorNamespace(o): {}}},
			}},
		// Tests and benchmarks stop and start managers in one process.
		Controller: config.Controller{SkipNameValidation: ptr.To(true)},
	})
	if err != nil {
		return nil, fmt.Errorf("create manager: %w", err)
	}
	//nolint:staticcheck // The Events users and tests read are core/v1 Events.
	recorder := mgr.GetEventRecorderFor("vip-allocator")
	reservedAddrs, err := reserved.NewSource(mgr, o.ServiceCIDRs)
	if err != nil {
		return nil, err
	}
	if err := (&service.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder,
		OwnClassOnly: o.OwnClassOnly, Workers: o.Workers, LeaderElection: o.LeaderElect,
		IPMode: corev1.LoadBalancerIPMode(o.IPMode), Reserved: reservedAddrs, ReleasedGrace: o.ReleasedGrace}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up Service controller: %w", err)
	}
	if err := (&ipgroup.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Reserved: reservedAddrs, OnCordon: o.Agent.OnCordon}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up IPGroup controller: %w", err)
	}
	if err := (&bgppeer.Reconciler{Client: mgr.GetClient(), Recorder: recorder, Namespace: operatorNamespace(o)}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up BGPPeer controller: %w", err)
	}
	if err := (&lanrecord.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up the controller of addresses in use on the LAN: %w", err)
	}
	if err := (&nodeview.Reconciler{Client: mgr.GetClient()}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up NodeView controller: %w", err)
	}
	if o.Agent.Namespace != "" {
		if err := (&agent.Reconciler{Client: mgr.GetClient(), APIReader: mgr.GetAPIReader(), Recorder: recorder, Options: o.Agent}).SetupWithManager(mgr); err != nil {
			return nil, fmt.Errorf("set up agent controller: %w", err)
		}
	}
	migrationOptions := o.Migration
	migrationOptions.OwnClassOnly, migrationOptions.Workers = o.OwnClassOnly, max(cmp.Or(migrationOptions.Workers, o.Workers), 1)
	//nolint:staticcheck // operator-utils' ReconcilerBase takes the core/v1 event recorder.
	migrationBase := util.NewFromManager(mgr, mgr.GetEventRecorderFor("vip-allocator-migration"))
	if err := (&migration.Reconciler{ReconcilerBase: migrationBase, Options: migrationOptions}).SetupWithManager(mgr); err != nil {
		return nil, fmt.Errorf("set up migration controller: %w", err)
	}
	if o.AdmissionPolicies {
		if err := mgr.Add(&admissionpolicy.Checker{Reader: mgr.GetAPIReader(), Recorder: recorder, Namespace: operatorNamespace(o),
			Files: admission.Files, Period: cmp.Or(o.AdmissionPolicyPeriod, time.Minute)}); err != nil {
			return nil, fmt.Errorf("set up the admission policy check: %w", err)
		}
	}
	if err := mgr.AddHealthzCheck("ping", healthz.Ping); err != nil {
		return nil, err
	}
	return mgr, nil
}

// operatorNamespace holds the operator's Secrets: its own pod's namespace
// (--namespace), or the bundle's when it runs outside a pod.
func operatorNamespace(o OperatorOptions) string {
	return cmp.Or(o.Agent.Namespace, paasv1.DefaultNamespace)
}
