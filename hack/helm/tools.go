//go:build tools

// Package helm pins the Helm that 'make helm' builds into bin/helm: the chart in
// charts/vip-allocator is linted, rendered and installed with it.
package helm

import (
	_ "helm.sh/helm/v4/cmd/helm"
)
