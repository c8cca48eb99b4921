package v1

import (
	"strings"
)

// What the original paas.org operator (releases 0.3 and 1.0, installed from its
// deploy/bundle.yaml) leaves in a cluster, named once for the operator, which
// adopts its Services and ledger, and for "vip-allocator migrate upgrade",
// which removes the rest.
const (
	// OriginalServiceFinalizer is the finalizer the original put on every
	// LoadBalancer Service it served, to delete the Service's ledger object
	// before the Service goes. Nothing removes it once the original is gone.
	OriginalServiceFinalizer = "ips.paas.org/finalizer"
	// OriginalNamespace is the namespace the original's bundle installs into.
	OriginalNamespace = "vip-allocator-operator"
	// OriginalDeployment is the original's manager Deployment.
	OriginalDeployment = "vip-allocator-operator-controller-manager"
	// OriginalImageRepository is the original's image, on any registry and at any tag.
	OriginalImageRepository = "paasteam324/vip-allocator-operator"
	// OriginalWebhookConfiguration is the original's ValidatingWebhookConfiguration
	// (webhook vip.kb.io on IPs; 0.3 also vvirtualip.kb.io on VirtualIPs), both
	// failurePolicy Fail: with no pod behind them every ledger write fails.
	OriginalWebhookConfiguration = "vip-allocator-operator-validating-webhook-configuration"
	// OriginalWebhookService is the Service, in the original's namespace, that
	// every webhook of OriginalWebhookConfiguration calls.
	OriginalWebhookService = "vip-allocator-operator-webhook"
	// OriginalServiceAccount is the original's ServiceAccount.
	OriginalServiceAccount = "vip-allocator-operator-sa"
	// OriginalManagerBinding is the original's ClusterRoleBinding of
	// OriginalManagerRole to its ServiceAccount.
	OriginalManagerBinding = "vip-allocator-operator-manager-role-binding"
	// OriginalManagerRole is the original's ClusterRole.
	OriginalManagerRole = "vip-allocator-operator-manager-role"
	// OriginalClusterAdminBinding is the ClusterRoleBinding of cluster-admin to
	// the original's ServiceAccount that 0.3 installs.
	OriginalClusterAdminBinding = "vip-allocator-operator-manager-rolebinding"
	// OriginalLeaderElectionBinding is the original's RoleBinding of
	// OriginalLeaderElectionRole to its ServiceAccount, in its namespace.
	OriginalLeaderElectionBinding = "vip-allocator-operator-leader-election-rolebinding"
	// OriginalLeaderElectionRole is the original's Role in its namespace.
	OriginalLeaderElectionRole = "vip-allocator-operator-leader-election-role"
)

// IsOriginalImage reports whether a container image is the original operator's
// (docker.io/paasteam324/vip-allocator-operator:1.0, a mirror's copy, a digest).
func IsOriginalImage(image string) bool {
	repo := image
	if at := strings.Index(repo, "@"); at >= 0 {
		repo = repo[:at]
	}
	if slash, colon := strings.LastIndex(repo, "/"), strings.LastIndex(repo, ":"); colon > slash {
		repo = repo[:colon]
	}
	return repo == OriginalImageRepository || strings.HasSuffix(repo, "/"+OriginalImageRepository)
}
