// Package monitoring tests what deploy/monitoring.yaml and the OLM bundle ship
// for Prometheus and Grafana (config/prometheus, config/monitoring): the
// alerting rules pass promtool's checks and unit tests (testdata/rules_test.yaml),
// every alert is shown firing and not firing, every runbook link leads to a
// section of docs/troubleshooting.md, and every metric the rules and the
// dashboard read is one the operator or the agent registers.
package monitoring

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"sigs.k8s.io/yaml"

	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// rule is one alerting rule of the PrometheusRule.
type rule struct {
	Alert       string            `json:"alert"`
	Expr        string            `json:"expr"`
	For         string            `json:"for"`
	Labels      map[string]string `json:"labels"`
	Annotations map[string]string `json:"annotations"`
}

type ruleGroups struct {
	Groups []struct {
		Name  string `json:"name"`
		Rules []rule `json:"rules"`
	} `json:"groups"`
}

// readRules returns the rule groups of config/prometheus/rules.yaml, as a
// Prometheus rule file (the PrometheusRule's spec), and its alerts.
func readRules(t *testing.T) ([]byte, []rule) {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "prometheus", "rules.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var pr struct {
		APIVersion string     `json:"apiVersion"`
		Kind       string     `json:"kind"`
		Metadata   any        `json:"metadata"`
		Spec       ruleGroups `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &pr); err != nil {
		t.Fatalf("config/prometheus/rules.yaml: %v", err)
	}
	if pr.APIVersion != "monitoring.coreos.com/v1" || pr.Kind != "PrometheusRule" {
		t.Fatalf("config/prometheus/rules.yaml is a %s %s, want a monitoring.coreos.com/v1 PrometheusRule", pr.APIVersion, pr.Kind)
	}
	// promtool reads the spec as written, not as this test's types see it.
	var raw struct {
		Spec any `json:"spec"`
	}
	if err := yaml.Unmarshal(data, &raw); err != nil {
		t.Fatal(err)
	}
	spec, err := yaml.Marshal(raw.Spec)
	if err != nil {
		t.Fatal(err)
	}
	var alerts []rule
	for _, g := range pr.Spec.Groups {
		alerts = append(alerts, g.Rules...)
	}
	return spec, alerts
}

// TestEveryAlertIsTested: testdata/rules_test.yaml shows each alert firing at
// least once, and not firing at least once.
func TestEveryAlertIsTested(t *testing.T) {
	_, alerts := readRules(t)
	data, err := os.ReadFile(filepath.Join("testdata", "rules_test.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var tests struct {
		Tests []struct {
			AlertRuleTest []struct {
				Alertname string `json:"alertname"`
				ExpAlerts []any  `json:"exp_alerts"`
			} `json:"alert_rule_test"`
		} `json:"tests"`
	}
	if err := yaml.Unmarshal(data, &tests); err != nil {
		t.Fatal(err)
	}
	fires, quiet := map[string]bool{}, map[string]bool{}
	for _, tc := range tests.Tests {
		for _, a := range tc.AlertRuleTest {
			if len(a.ExpAlerts) > 0 {
				fires[a.Alertname] = true
			} else {
				quiet[a.Alertname] = true
			}
		}
	}
	for _, a := range alerts {
		if !fires[a.Alert] {
			t.Errorf("no test shows %s firing", a.Alert)
		}
		if !quiet[a.Alert] {
			t.Errorf("no test shows %s not firing", a.Alert)
		}
	}
}

const runbookBase = "https://github.com/paas-org/vip-allocator-operator/blob/main/docs/troubleshooting.md#"

// TestRunbooks: every alert has a severity, a summary, a description and a
// runbook_url that names a section of docs/troubleshooting.md, which says
// what the alert means and what to do.
func TestRunbooks(t *testing.T) {
	_, alerts := readRules(t)
	doc, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "docs", "troubleshooting.md"))
	if err != nil {
		t.Fatal(err)
	}
	anchors := headingAnchors(string(doc))
	seen := map[string]bool{}
	for _, a := range alerts {
		if seen[a.Alert] {
			t.Errorf("alert %s defined twice", a.Alert)
		}
		seen[a.Alert] = true
		if !slices.Contains([]string{"critical", "warning", "info"}, a.Labels["severity"]) {
			t.Errorf("%s: severity %q, want critical, warning or info", a.Alert, a.Labels["severity"])
		}
		for _, k := range []string{"summary", "description"} {
			if a.Annotations[k] == "" {
				t.Errorf("%s has no %s", a.Alert, k)
			}
		}
		url := a.Annotations["runbook_url"]
		anchor, ok := strings.CutPrefix(url, runbookBase)
		if !ok {
			t.Errorf("%s: runbook_url %q is not a section of %s", a.Alert, url, strings.TrimSuffix(runbookBase, "#"))
			continue
		}
		section, ok := anchors[anchor]
		if !ok {
			t.Errorf("%s: runbook_url names #%s, which no heading of docs/troubleshooting.md makes", a.Alert, anchor)
			continue
		}
		if !strings.Contains(section, a.Alert) {
			t.Errorf("%s: its section #%s does not name it", a.Alert, anchor)
		}
		if len(strings.Fields(section)) < 30 {
			t.Errorf("%s: its section #%s is too short to say what it means and what to do", a.Alert, anchor)
		}
	}
}

var nonAnchor = regexp.MustCompile(`[^\p{L}\p{N}_ -]`)

// headingAnchors maps the anchors GitHub makes of a Markdown document's
// headings to each heading's section text (up to the next heading).
func headingAnchors(doc string) map[string]string {
	out := map[string]string{}
	var current string
	var body strings.Builder
	flush := func() {
		if current != "" {
			out[current] = body.String()
		}
		body.Reset()
	}
	inFence := false
	for _, line := range strings.Split(doc, "\n") {
		if strings.HasPrefix(line, "```") {
			inFence = !inFence
		}
		if !inFence && strings.HasPrefix(line, "#") {
			flush()
			title := strings.TrimSpace(strings.TrimLeft(line, "#"))
			slug := strings.ReplaceAll(strings.ToLower(nonAnchor.ReplaceAllString(title, "")), " ", "-")
			for n, base := 1, slug; ; n++ { // GitHub numbers repeated headings
				if _, dup := out[slug]; !dup {
					break
				}
				slug = fmt.Sprintf("%s-%d", base, n)
			}
			current = slug
			body.WriteString(line + "\n")
			continue
		}
		body.WriteString(line + "\n")
	}
	flush()
	return out
}
