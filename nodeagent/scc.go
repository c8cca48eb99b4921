package nodeagent

// On OpenShift the agent's pods are admitted by the SecurityContextConstraints
// vip-allocator-agent (config/openshift): host network, NET_ADMIN and NET_RAW,
// nothing more. Pods may use an SCC only when their ServiceAccount may "use"
// it; the rule is harmless on clusters without SCCs.

// +kubebuilder:rbac:groups=security.openshift.io,resources=securitycontextconstraints,verbs=use,resourceNames=vip-allocator-agent
