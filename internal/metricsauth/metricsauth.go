// Package metricsauth is how the operator and the agent serve their metrics:
// over TLS, to callers the API server authenticates (TokenReview) and
// authorizes (SubjectAccessReview, `get` on the non-resource URL /metrics),
// the kubebuilder convention. The agent runs in the host's network namespace,
// so its metrics port is on the node's LAN: without this anyone there could read
// which VIPs it carries, its BGP peers and its gossip members.
//
// It must never be turned off silently: Options with secure=false is for a
// caller that says so (a flag), and logs it.
//
// The filter is our own, not controller-runtime's WithAuthenticationAndAuthorization:
// that one builds on k8s.io/apiserver's delegating authenticator and authorizer,
// which bring cel-go and the API server's CEL libraries into the binary: ~11 MB
// of text and ~6 MiB resident at start-up (CEL's package inits) for two API calls
// and a cache, in an operator whose target is 100 MiB at 3,000 Services.
package metricsauth

import (
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
)

// ReaderClusterRole is the ClusterRole (config/rbac/metrics_reader_role.yaml)
// to bind to whatever scrapes the metrics, such as Prometheus' ServiceAccount.
const ReaderClusterRole = "vip-allocator-metrics-reader"

// Both the operator's and the agent's ClusterRole get these (the Makefile's manifests target
// reads this package for both): the filter asks the API server about each caller.
// +kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create
// +kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create

// Options serves metrics on bindAddress ("0" disables them). With secure, the
// server speaks TLS (a self-signed certificate made in memory unless certDir
// holds tls.crt and tls.key) and lets in only callers allowed to get /metrics.
func Options(bindAddress string, secure bool, certDir string) metricsserver.Options {
	if !secure {
		return metricsserver.Options{BindAddress: bindAddress}
	}
	return metricsserver.Options{
		BindAddress:    bindAddress,
		SecureServing:  true,
		CertDir:        certDir,
		FilterProvider: WithTokenAndAccessReviews,
	}
}
