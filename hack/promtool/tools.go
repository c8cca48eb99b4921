//go:build tools

// Package promtool pins promtool's module for hack/promtool.sh.
package promtool

import _ "github.com/prometheus/prometheus/cmd/promtool"
