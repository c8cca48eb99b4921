//go:build tools

// Package metallb records the MetalLB controller and speaker that the tests run (hack/metallb.sh
// builds them), so that 'go mod tidy' keeps their dependencies. Only this helper module depends
// on MetalLB; the project's own code reads MetalLB's objects as unstructured.
package metallb

import (
	_ "go.universe.tf/metallb/controller"
	_ "go.universe.tf/metallb/speaker"
)
