//go:build tools

// Package metallb records the MetalLB controller that test/metallb runs (hack/metallb.sh builds
// it), so that 'go mod tidy' keeps its dependencies. Only this helper module depends on MetalLB;
// the project's own code reads MetalLB's objects as unstructured.
package metallb

import (
	_ "go.universe.tf/metallb/controller"
)
