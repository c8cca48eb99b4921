//go:build tools

// Package promtool pins the module of promtool and Prometheus for hack/promtool.sh.
package promtool

import (
	_ "github.com/prometheus/prometheus/cmd/prometheus"
	_ "github.com/prometheus/prometheus/cmd/promtool"
)
