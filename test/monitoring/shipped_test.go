package monitoring

import (
	"bytes"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/test/testenv"
)

// objects reads the YAML documents of a file of the repository.
func objects(t *testing.T, rel string) []*unstructured.Unstructured {
	t.Helper()
	data, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), rel))
	if err != nil {
		t.Fatal(err)
	}
	var out []*unstructured.Unstructured
	for _, doc := range bytes.Split(data, []byte("\n---\n")) {
		var m map[string]any
		if err := yaml.Unmarshal(doc, &m); err != nil {
			t.Fatalf("%s: %v", rel, err)
		}
		if len(m) > 0 {
			out = append(out, &unstructured.Unstructured{Object: m})
		}
	}
	return out
}

func ofKind(objs []*unstructured.Unstructured, kind string) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range objs {
		if o.GetKind() == kind {
			out = append(out, o)
		}
	}
	return out
}

// TestShipped: deploy/monitoring.yaml and the OLM bundle carry the rules of
// config/prometheus, and the ServiceMonitors scrape both processes over TLS
// with a bearer token, at ports their pods name.
func TestShipped(t *testing.T) {
	config := objects(t, "config/prometheus/rules.yaml")[0]
	deploy := objects(t, "deploy/monitoring.yaml")
	bundleRule := objects(t, "bundle/manifests/vip-allocator_monitoring.coreos.com_v1_prometheusrule.yaml")
	for where, rules := range map[string][]*unstructured.Unstructured{"deploy/monitoring.yaml": ofKind(deploy, "PrometheusRule"), "the OLM bundle": bundleRule} {
		if len(rules) != 1 || !reflect.DeepEqual(rules[0].Object["spec"], config.Object["spec"]) {
			t.Errorf("%s does not carry config/prometheus/rules.yaml's rules (run make bundle-yaml bundle)", where)
		}
	}
	if cms := ofKind(deploy, "ConfigMap"); len(cms) != 1 || cms[0].GetLabels()["grafana_dashboard"] != "1" {
		t.Errorf("deploy/monitoring.yaml: want one ConfigMap labelled grafana_dashboard=1 (the dashboard), got %d", len(cms))
	} else {
		dash, err := os.ReadFile(filepath.Join(testenv.RepoRoot(), "config", "monitoring", "vip-allocator-dashboard.json"))
		if err != nil {
			t.Fatal(err)
		}
		if got, _, _ := unstructured.NestedString(cms[0].Object, "data", "vip-allocator.json"); got != string(dash) {
			t.Error("deploy/monitoring.yaml's dashboard is not config/monitoring/vip-allocator-dashboard.json")
		}
	}
	if b := ofKind(deploy, "ClusterRoleBinding"); len(b) != 1 || b[0].Object["roleRef"].(map[string]any)["name"] != "vip-allocator-metrics-reader" {
		t.Error("deploy/monitoring.yaml must bind vip-allocator-metrics-reader to Prometheus")
	}

	// The ports the pods name: the operator's Deployment, and the agent's
	// DaemonSet, which the operator writes (paasv1.AgentMetricsPort).
	ports := map[string]int64{"vip-allocator-agent": paasv1.AgentMetricsPort}
	for _, d := range ofKind(objects(t, "deploy/bundle.yaml"), "Deployment") {
		containers, _, _ := unstructured.NestedSlice(d.Object, "spec", "template", "spec", "containers")
		for _, p := range containers[0].(map[string]any)["ports"].([]any) {
			if p := p.(map[string]any); p["name"] == "metrics" {
				ports[d.GetName()] = toInt(p["containerPort"])
			}
		}
	}
	if ports["vip-allocator-operator"] != 8443 {
		t.Errorf("the operator's Deployment names no metrics port 8443: %v", ports)
	}
	services := ofKind(deploy, "Service")
	monitors := ofKind(deploy, "ServiceMonitor")
	if len(services) != 2 || len(monitors) != 2 {
		t.Fatalf("deploy/monitoring.yaml: %d Services, %d ServiceMonitors, want 2 of each", len(services), len(monitors))
	}
	for _, app := range []string{"vip-allocator-operator", "vip-allocator-agent"} {
		var svc, mon *unstructured.Unstructured
		for _, s := range services {
			if sel, _, _ := unstructured.NestedString(s.Object, "spec", "selector", "app.kubernetes.io/name"); sel == app {
				svc = s
			}
		}
		for _, m := range monitors {
			if sel, _, _ := unstructured.NestedString(m.Object, "spec", "selector", "matchLabels", "app.kubernetes.io/name"); sel == app {
				mon = m
			}
		}
		if svc == nil || mon == nil {
			t.Errorf("%s: Service %v, ServiceMonitor %v", app, svc != nil, mon != nil)
			continue
		}
		if svc.GetLabels()["app.kubernetes.io/name"] != app {
			t.Errorf("the ServiceMonitor of %s does not select its Service", app)
		}
		svcPorts, _, _ := unstructured.NestedSlice(svc.Object, "spec", "ports")
		p := svcPorts[0].(map[string]any)
		if len(svcPorts) != 1 || p["name"] != "metrics" || p["targetPort"] != "metrics" || toInt(p["port"]) != ports[app] {
			t.Errorf("Service of %s: ports %v, want metrics -> the pods' metrics port %d", app, svcPorts, ports[app])
		}
		eps, _, _ := unstructured.NestedSlice(mon.Object, "spec", "endpoints")
		if len(eps) != 1 {
			t.Fatalf("ServiceMonitor of %s: %d endpoints", app, len(eps))
		}
		ep := eps[0].(map[string]any)
		skip, _, _ := unstructured.NestedBool(ep, "tlsConfig", "insecureSkipVerify")
		if ep["port"] != "metrics" || ep["scheme"] != "https" || ep["path"] != "/metrics" || !skip ||
			ep["bearerTokenFile"] != "/var/run/secrets/kubernetes.io/serviceaccount/token" {
			t.Errorf("ServiceMonitor of %s: endpoint %v, want https on metrics with Prometheus' token", app, ep)
		}
	}

	// The bundle carries the same Services and ServiceMonitors, and the agents' facts Service (explain).
	dir := filepath.Join(testenv.RepoRoot(), "bundle", "manifests")
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var kinds []string
	for _, e := range entries {
		for _, o := range objects(t, filepath.Join("bundle", "manifests", e.Name())) {
			if slices.Contains([]string{"Service", "ServiceMonitor", "PrometheusRule"}, o.GetKind()) {
				kinds = append(kinds, o.GetKind()+"/"+o.GetName())
			}
		}
	}
	slices.Sort(kinds)
	want := []string{"PrometheusRule/vip-allocator", "Service/vip-allocator-agent-facts", "Service/vip-allocator-agent-metrics", "Service/vip-allocator-operator-metrics",
		"ServiceMonitor/vip-allocator-agent", "ServiceMonitor/vip-allocator-operator"}
	if !reflect.DeepEqual(kinds, want) {
		t.Errorf("bundle/manifests holds %s, want %s", strings.Join(kinds, ", "), strings.Join(want, ", "))
	}
}

func toInt(v any) int64 {
	switch v := v.(type) {
	case int64:
		return v
	case float64:
		return int64(v)
	}
	return -1
}
