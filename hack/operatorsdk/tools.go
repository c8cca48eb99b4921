//go:build tools

// Package operatorsdk records the main package 'make operator-sdk' builds, so that
// 'go mod tidy' keeps its dependencies.
package operatorsdk

import _ "github.com/operator-framework/operator-sdk/cmd/operator-sdk"
