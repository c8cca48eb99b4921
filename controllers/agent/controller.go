package agent

import (
	"context"
	"crypto/rand"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/builder"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/event"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	"sigs.k8s.io/controller-runtime/pkg/predicate"
	"sigs.k8s.io/controller-runtime/pkg/source"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/controllers/internal/managedby"
	"github.com/paas-org/vip-allocator-operator/internal/election"
)

// Names of what the operator deploys for the node agent.
const (
	Name           = paasv1.AgentDaemonSet
	ServiceAccount = "vip-allocator-agent"
)

// Options configure the agent DaemonSet.
type Options struct {
	Namespace    string
	Image        string
	NodeSelector map[string]string
	// Tolerations; nil tolerates every taint (the agent must run wherever a VIP may land).
	Tolerations []corev1.Toleration
	// ExtraArgs are appended to "agent --node-name=$(NODE_NAME)".
	ExtraArgs []string
	// OnCordon is the operator's --on-cordon, given to every agent so they
	// and the operator's Announceable condition judge a cordoned node alike.
	OnCordon election.OnCordon
}

// Reconciler keeps the agent DaemonSet as the operator wants it: it
// creates it, puts back what was changed and recreates it when deleted. OLM's
// CSV cannot ship a DaemonSet, so the operator owns it.
type Reconciler struct {
	// Client reads from the manager's cache and writes to the API server.
	Client client.Client
	// APIReader reads from the API server itself, for what the cache may not show yet.
	APIReader client.Reader
	// Recorder records the Events users read on the objects.
	Recorder record.EventRecorder
	Options  Options
}

// Reconcile keeps the agents' DaemonSet, its namespace and its gossip Secret
// what this release installs.
func (r *Reconciler) Reconcile(ctx context.Context, _ ctrl.Request) (ctrl.Result, error) {
	if err := r.ensureMemberlistSecret(ctx); err != nil {
		return ctrl.Result{}, err
	}
	owner, err := r.agentOwner(ctx)
	if err != nil {
		return ctrl.Result{}, err
	}
	ds := r.desired()
	ds.OwnerReferences = []metav1.OwnerReference{owner}
	// Server-side apply: only the fields we set are ours; defaults the API
	// server adds do not look like drift, and an unchanged apply writes nothing.
	if err := r.Client.Patch(ctx, ds, client.Apply, paasv1.FieldOwner, client.ForceOwnership); err != nil { //nolint:staticcheck // a typed object applied whole; Client.Apply wants apply configurations for the same
		return ctrl.Result{}, fmt.Errorf("apply agent DaemonSet %s/%s: %w", ds.Namespace, ds.Name, err)
	}
	r.labelNamespace(ctx, ds)
	return ctrl.Result{}, nil
}

// ensureMemberlistSecret creates the agents' gossip key unless it exists
// (or fills it into a Secret that exists without one); a key already there is
// never replaced.
func (r *Reconciler) ensureMemberlistSecret(ctx context.Context) error {
	secret := &corev1.Secret{}
	key := types.NamespacedName{Namespace: r.Options.Namespace, Name: paasv1.MemberlistSecret}
	err := r.Client.Get(ctx, key, secret)
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("read Secret %s: %w", key, err)
	}
	if err == nil && len(secret.Data[paasv1.MemberlistKey]) > 0 {
		return nil
	}
	gossipKey := make([]byte, 32)
	if _, err := rand.Read(gossipKey); err != nil {
		return fmt.Errorf("generate memberlist key: %w", err)
	}
	if err != nil { // not found
		secret = &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: key.Name, Namespace: key.Namespace, Labels: map[string]string{managedby.Label: managedby.Operator}},
			Type:       corev1.SecretTypeOpaque,
			Data:       map[string][]byte{paasv1.MemberlistKey: gossipKey},
		}
		// A create that finds one (another replica, a stale cache) changes nothing.
		if err := r.Client.Create(ctx, secret); err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("create Secret %s: %w", key, err)
		}
		return nil
	}
	if secret.Data == nil {
		secret.Data = map[string][]byte{}
	}
	secret.Data[paasv1.MemberlistKey] = gossipKey
	// Update carries the resourceVersion read: two replicas never both fill it.
	if err := r.Client.Update(ctx, secret); err != nil {
		return fmt.Errorf("fill Secret %s with the gossip key: %w", key, err)
	}
	return nil
}

// desired is the agent DaemonSet: host network, NET_ADMIN and NET_RAW only.
func (r *Reconciler) desired() *appsv1.DaemonSet {
	o := r.Options
	labels := map[string]string{"app.kubernetes.io/name": Name, managedby.Label: managedby.Operator}
	tolerations := o.Tolerations
	if tolerations == nil {
		tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	}
	hostPathFile := corev1.HostPathFileOrCreate
	return &appsv1.DaemonSet{
		TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "DaemonSet"},
		ObjectMeta: metav1.ObjectMeta{Name: Name, Namespace: o.Namespace, Labels: labels},
		Spec: appsv1.DaemonSetSpec{
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app.kubernetes.io/name": Name}},
			UpdateStrategy: appsv1.DaemonSetUpdateStrategy{
				Type:          appsv1.RollingUpdateDaemonSetStrategyType,
				RollingUpdate: &appsv1.RollingUpdateDaemonSet{MaxUnavailable: ptr.To(intstr.FromInt32(1))},
			},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					ServiceAccountName: ServiceAccount,
					HostNetwork:        true,
					DNSPolicy:          corev1.DNSClusterFirstWithHostNet,
					PriorityClassName:  "system-node-critical",
					NodeSelector:       o.NodeSelector,
					Tolerations:        tolerations,
					Containers: []corev1.Container{{
						Name:  "agent",
						Image: o.Image,
						Args:  agentArgs(o),
						Env: []corev1.EnvVar{
							{Name: "NODE_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "spec.nodeName"}}},
							{Name: "POD_NAMESPACE", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.namespace"}}},
						},
						SecurityContext: agentSecurityContext(),
						Ports:           []corev1.ContainerPort{{Name: "metrics", ContainerPort: paasv1.AgentMetricsPort}},
						// The agent binds its health endpoint to the host's loopback (--health-probe-bind-address),
						// where the kubelet, in the same network namespace, reaches it and the LAN does not.
						LivenessProbe: &corev1.Probe{
							ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
								Host: "127.0.0.1", Path: "/healthz", Port: intstr.FromInt32(paasv1.AgentProbePort)}},
							PeriodSeconds: 10, TimeoutSeconds: 2, FailureThreshold: 3,
						},
						Resources: agentResources(),
						// iptables serialises writers on the host's lock file.
						VolumeMounts: []corev1.VolumeMount{{Name: "xtables-lock", MountPath: "/run/xtables.lock"}},
					}},
					Volumes: []corev1.Volume{{Name: "xtables-lock", VolumeSource: corev1.VolumeSource{
						HostPath: &corev1.HostPathVolumeSource{Path: "/run/xtables.lock", Type: &hostPathFile}}}},
				},
			},
		},
	}
}

// SetupWithManager reconciles at start and whenever the DaemonSet changes or
// disappears.
func (r *Reconciler) SetupWithManager(mgr ctrl.Manager) error {
	key := types.NamespacedName{Namespace: r.Options.Namespace, Name: Name}
	ours := predicate.NewPredicateFuncs(func(o client.Object) bool {
		return o.GetNamespace() == key.Namespace && o.GetName() == key.Name
	})
	start := make(chan event.GenericEvent, 1)
	start <- event.GenericEvent{Object: &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}}
	return ctrl.NewControllerManagedBy(mgr).
		Named("agent").
		For(&appsv1.DaemonSet{}, builder.WithPredicates(ours)).
		WatchesRawSource(source.Channel(start, &handler.EnqueueRequestForObject{})).
		Complete(r)
}

// agentArgs is the agent's command line. --on-cordon is passed only when it
// is not the default, so that upgrading the operator restarts no agent.
func agentArgs(o Options) []string {
	args := []string{"agent", "--node-name=$(NODE_NAME)", "--daemonset=" + o.Namespace + "/" + Name}
	if o.OnCordon != "" && o.OnCordon != election.OnCordonHandover {
		args = append(args, "--on-cordon="+string(o.OnCordon))
	}
	return append(args, o.ExtraArgs...)
}
