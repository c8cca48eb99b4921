package controllers

// The operator's permissions in its own namespace: a Role, not a ClusterRole,
// so a stolen operator token reaches no DaemonSet, Secret or Lease elsewhere.
// The namespace named here is the one deploy/bundle.yaml installs into; OLM
// puts the same rules into the namespace it installs the operator in. The
// manager caches DaemonSets and Secrets of this namespace only (cmd/manager.go),
// so no list or watch ever needs more.
//
// The agent DaemonSet: applied (server-side apply creates it, so create too) and
// watched to put back what was changed; only it may be patched.
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch;create,namespace=vip-allocator-operator
// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=patch,resourceNames=vip-allocator-agent,namespace=vip-allocator-operator
//
// Secrets: it reads the password Secrets BGPPeers name, and writes the two the
// agents read (the gossip key, once; the BGP passwords as BGPPeers name them).
// RBAC cannot restrict a create by name, so an admission policy does
// (config/admission/operator_secret_writes.yaml): the operator creates no
// other Secret, in particular no token Secret for the agent's ServiceAccount.
// The Secrets are not shipped empty in the bundles instead: OLM replaces a
// bundle's Secret on every upgrade with the bundle's copy, which would wipe
// the gossip key while the agents still use it.
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;create,namespace=vip-allocator-operator
// +kubebuilder:rbac:groups="",resources=secrets,verbs=update,resourceNames=vip-allocator-memberlist;vip-allocator-bgp-passwords,namespace=vip-allocator-operator
//
// Leader election (one Lease; the lock is created once, then renewed).
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create,namespace=vip-allocator-operator
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=update,resourceNames=vip-allocator-operator.paas.org,namespace=vip-allocator-operator
//
// Its own pod, for the image the agent runs (OwnImage), and the agent's
// ServiceAccount, which owns the agent DaemonSet (agentOwner).
// +kubebuilder:rbac:groups="",resources=pods,verbs=get,namespace=vip-allocator-operator
// +kubebuilder:rbac:groups="",resources=serviceaccounts,verbs=get,resourceNames=vip-allocator-agent,namespace=vip-allocator-operator
//
// Its own Namespace, labelled for Pod Security (labelNamespace): a Role in a
// namespace that grants "namespaces" reaches that one Namespace object only.
// +kubebuilder:rbac:groups="",resources=namespaces,verbs=patch,namespace=vip-allocator-operator
