package monitoring

import (
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
	"sigs.k8s.io/controller-runtime/pkg/metrics"

	"github.com/paas-org/vip-allocator-operator/test/testenv"

	// Their metrics register in controller-runtime's registry when the
	// packages load, as in the binary (the operator and the agent are one).
	_ "github.com/paas-org/vip-allocator-operator/controllers/ipgroup"
	_ "github.com/paas-org/vip-allocator-operator/controllers/service"
	_ "github.com/paas-org/vip-allocator-operator/migration"
	_ "github.com/paas-org/vip-allocator-operator/nodeagent"
)

// prometheusOwn are the series Prometheus makes itself for every target.
var prometheusOwn = []string{"up"}

// TestMetricNamesExist: every metric the alerting rules and the Grafana
// dashboard read is registered by the operator or the agent (or is
// Prometheus' own), so a renamed metric cannot leave an alert that never fires.
func TestMetricNamesExist(t *testing.T) {
	_, alerts := readRules(t)
	exprs := map[string][]string{} // where -> expressions
	for _, a := range alerts {
		exprs["alert "+a.Alert] = []string{a.Expr}
	}
	dashboard := filepath.Join(testenv.RepoRoot(), "config", "monitoring", "vip-allocator-dashboard.json")
	data, err := os.ReadFile(dashboard)
	if err != nil {
		t.Fatal(err)
	}
	var dash any
	if err := json.Unmarshal(data, &dash); err != nil {
		t.Fatalf("%s: %v", dashboard, err)
	}
	panelExprs(dash, "dashboard", exprs)
	if len(exprs) < 20 {
		t.Fatalf("only %d rules and panels with expressions found", len(exprs))
	}
	var places []string
	for where := range exprs {
		places = append(places, where)
	}
	sort.Strings(places)
	used := 0
	for _, where := range places {
		for _, expr := range exprs[where] {
			names := metricNames(expr)
			if len(names) == 0 {
				t.Errorf("%s: no metric found in %q", where, expr)
			}
			for _, name := range names {
				used++
				if !slices.Contains(prometheusOwn, name) && !registered(name) {
					t.Errorf("%s reads %s, which neither the operator nor the agent registers", where, name)
				}
			}
		}
	}
	t.Logf("%d metric uses in %d rules and panels checked", used, len(places))
}

// TestMetricNameCheck: the check itself tells registered names from others.
func TestMetricNameCheck(t *testing.T) {
	for _, name := range []string{"vip_allocator_addresses_total", "vip_allocator_services_pending_seconds",
		"vip_allocator_agent_sync_duration_seconds_bucket", "vip_allocator_agent_arp_conflicts_total", "workqueue_depth"} {
		if !registered(name) {
			t.Errorf("%s not found registered", name)
		}
	}
	for _, name := range []string{"vip_allocator_no_such_metric", "vip_allocator_addresses_total_bucket"} {
		if registered(name) {
			t.Errorf("%s found registered", name)
		}
	}
	got := metricNames(`sum by (ipgroup, le) (rate(a_total{reason="x", b="c"}[5m])) / on () group_left () max(b_seconds offset 5m) > 0.9 and c unless count_values("v", d)`)
	if want := []string{"a_total", "b_seconds", "c", "d"}; !slices.Equal(got, want) {
		t.Errorf("metricNames = %v, want %v", got, want)
	}
}

// panelExprs collects the "expr" of every panel target (and of every panel in
// a row) under where.
func panelExprs(v any, where string, out map[string][]string) {
	switch v := v.(type) {
	case map[string]any:
		if title, ok := v["title"].(string); ok && v["type"] != nil {
			where = "dashboard panel " + strings.TrimSpace(title)
		}
		if e, ok := v["expr"].(string); ok {
			out[where] = append(out[where], e)
		}
		for _, c := range v {
			panelExprs(c, where, out)
		}
	case []any:
		for _, c := range v {
			panelExprs(c, where, out)
		}
	}
}

// registered reports whether a metric of that name (a histogram's or
// summary's _bucket, _sum and _count series by their family's name) is in
// controller-runtime's registry, where the operator and the agent serve from.
// A registry refuses a second metric of a name it has; that refusal is the
// answer (the probe, accepted, is unregistered at once).
func registered(name string) bool {
	if exists(name) {
		return true
	}
	for _, suffix := range []string{"_bucket", "_sum", "_count"} {
		if base, ok := strings.CutSuffix(name, suffix); ok && exists(base) && isDistribution(base) {
			return true
		}
	}
	return false
}

func exists(name string) bool {
	probe := prometheus.NewGauge(prometheus.GaugeOpts{Name: name, Help: "probe"})
	err := metrics.Registry.Register(probe)
	if err == nil {
		metrics.Registry.Unregister(probe)
		return false
	}
	var are prometheus.AlreadyRegisteredError
	return errors.As(err, &are) || strings.Contains(err.Error(), "same fully-qualified name")
}

// isDistribution reports whether the family name is a histogram or a summary:
// its type as gathered, or, for a family with no series yet (not gathered),
// its name: what such a family observes has a unit (_seconds, _bytes).
func isDistribution(name string) bool {
	families, _ := metrics.Registry.Gather()
	for _, f := range families {
		if f.GetName() == name {
			typ := f.GetType().String()
			return strings.Contains(typ, "HISTOGRAM") || strings.Contains(typ, "SUMMARY")
		}
	}
	return strings.HasSuffix(name, "_seconds") || strings.HasSuffix(name, "_bytes")
}

var (
	promqlStrings   = regexp.MustCompile(`"(?:[^"\\]|\\.)*"|'(?:[^'\\]|\\.)*'`)
	promqlMatchers  = regexp.MustCompile(`\{[^}]*\}|\[[^\]]*\]`)
	promqlLabelList = regexp.MustCompile(`\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)`)
	promqlIdent     = regexp.MustCompile(`[a-zA-Z_:][a-zA-Z0-9_:]*`)
	promqlKeywords  = []string{"and", "or", "unless", "bool", "offset", "by", "without", "on", "ignoring", "group_left", "group_right", "inf", "nan"}
)

// metricNames returns the metric names a PromQL expression selects, in order
// of appearance: identifiers left once strings, label matchers, ranges, label
// lists, keywords, numbers and function calls are taken out.
func metricNames(expr string) []string {
	expr = promqlStrings.ReplaceAllString(expr, " ")
	expr = promqlMatchers.ReplaceAllString(expr, " ")
	expr = promqlLabelList.ReplaceAllString(expr, " ")
	var out []string
	for _, loc := range promqlIdent.FindAllStringIndex(expr, -1) {
		name := expr[loc[0]:loc[1]]
		if loc[0] > 0 && strings.ContainsAny(expr[loc[0]-1:loc[0]], "0123456789.$") {
			continue // part of a number or a duration (5m, 1e3), or a variable
		}
		if strings.HasPrefix(strings.TrimSpace(expr[loc[1]:]), "(") {
			continue // a function or an aggregation
		}
		if slices.Contains(promqlKeywords, strings.ToLower(name)) || slices.Contains(out, name) {
			continue
		}
		out = append(out, name)
	}
	return out
}
