package agent

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// What ties the agent DaemonSet to an installation, so that uninstalling
// removes the agents' rules and nothing else does.
//
// The DaemonSet is owned by the agent's ServiceAccount, which deploy/bundle.yaml
// (or OLM, from the CSV) creates and deletes. Deleting the bundle thus deletes
// the DaemonSet through the garbage collector; each agent, told by --daemonset
// which DaemonSet runs it, sees it gone on SIGTERM and removes its rules
// (nodeagent/teardown.go). A rolling update leaves the DaemonSet in place, so
// the rules stay.

// EventNamespaceNotPrivileged is recorded on the agent DaemonSet when the
// operator cannot label its namespace for Pod Security Admission.
const EventNamespaceNotPrivileged = "NamespaceNotPrivileged"

// The agent needs the host network, NET_ADMIN and NET_RAW: only the privileged
// Pod Security level admits that. The operator's own pod passes "restricted".
var agentNamespaceLabels = map[string]string{
	"pod-security.kubernetes.io/enforce": "privileged",
	"pod-security.kubernetes.io/audit":   "privileged",
	"pod-security.kubernetes.io/warn":    "privileged",
}

// agentOwner reads the agent's ServiceAccount, which owns the DaemonSet.
func (r *Reconciler) agentOwner(ctx context.Context) (metav1.OwnerReference, error) {
	sa := &corev1.ServiceAccount{}
	key := types.NamespacedName{Namespace: r.Options.Namespace, Name: ServiceAccount}
	// Uncached: one read per DaemonSet event is cheaper than watching every ServiceAccount.
	if err := r.APIReader.Get(ctx, key, sa); err != nil {
		return metav1.OwnerReference{}, fmt.Errorf("read the agent ServiceAccount %s (it comes with deploy/bundle.yaml; re-apply it): %w", key, err)
	}
	return metav1.OwnerReference{APIVersion: "v1", Kind: "ServiceAccount", Name: sa.Name, UID: sa.UID}, nil
}

// labelNamespace makes the agent's namespace admit it under Pod Security
// Admission. It does not force: a label someone else set on purpose wins, and
// the Event says what to change.
func (r *Reconciler) labelNamespace(ctx context.Context, ds *appsv1.DaemonSet) {
	ns := &corev1.Namespace{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: r.Options.Namespace, Labels: agentNamespaceLabels}}
	err := r.Client.Patch(ctx, ns, client.Apply, client.FieldOwner(string(paasv1.FieldOwner)+"-psa")) //nolint:staticcheck // a typed object applied whole; Client.Apply wants apply configurations for the same
	if err == nil {
		return
	}
	r.Recorder.Eventf(ds, corev1.EventTypeWarning, EventNamespaceNotPrivileged,
		"cannot label namespace %s for the agent (host network, NET_ADMIN, NET_RAW): %v; run: kubectl label namespace %s pod-security.kubernetes.io/enforce=privileged --overwrite",
		r.Options.Namespace, err, r.Options.Namespace)
}

// agentResources: requests from what the agent uses with 10,000 Services on the
// nftables plane or 1,000 BGP routes (docs/performance.md), and a memory
// limit well above that, so a leak or a flood ends in a restart of one agent (VIPs
// move on, the rules stay) instead of the node's OOM killer choosing. No CPU
// limit: throttling would slow failover.
func agentResources() corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("50m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("512Mi")},
	}
}

// agentSecurityContext runs the agent as root with only NET_ADMIN and NET_RAW:
// capabilities added to a non-root process do not reach iptables, and the
// image's own user is non-root for the operator's sake.
func agentSecurityContext() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		Privileged:               ptr.To(false),
		AllowPrivilegeEscalation: ptr.To(false),
		RunAsUser:                ptr.To[int64](0),
		RunAsNonRoot:             ptr.To(false),
		// Nothing in the image is written: rules go through netlink and iptables-restore,
		// whose only file is the host's xtables lock (a hostPath mount).
		ReadOnlyRootFilesystem: ptr.To(true),
		SeccompProfile:         &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
		Capabilities: &corev1.Capabilities{
			Add:  []corev1.Capability{"NET_ADMIN", "NET_RAW"},
			Drop: []corev1.Capability{"ALL"},
		},
	}
}
