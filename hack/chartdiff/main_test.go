package main

import (
	"slices"
	"strings"
	"testing"
)

const bundle = `
# a comment, as the bundle's header
apiVersion: v1
kind: ServiceAccount
metadata:
  name: op
  namespace: ns
---
apiVersion: apps/v1
kind: Deployment
metadata:
  labels:
    app.kubernetes.io/name: op
  name: op
  namespace: ns
spec:
  replicas: 1
  template:
    spec:
      containers:
      - args: [operator, --leader-elect]
        image: reg/op:1.0
        resources:
          requests: {cpu: 50m}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ips.paas.org
spec:
  group: paas.org
`

// chart is the bundle as the chart renders it: other key order, other
// quoting, the chart's labels and the CRD's keep annotation.
const chart = `
---
# Source: vip-allocator/templates/generated-rbac.yaml
apiVersion: v1
kind: ServiceAccount
metadata:
  labels:
    helm.sh/chart: vip-allocator-0.1.0
    app.kubernetes.io/managed-by: Helm
    app.kubernetes.io/instance: vip
    app.kubernetes.io/part-of: vip-allocator
    app.kubernetes.io/version: "1.0"
  name: op
  namespace: ns
---
apiVersion: apps/v1
kind: Deployment
metadata:
  namespace: ns
  name: op
  labels:
    app.kubernetes.io/managed-by: Helm
    app.kubernetes.io/name: op
spec:
  template:
    spec:
      containers:
      - image: "reg/op:1.0"
        args: ["operator", "--leader-elect"]
        resources:
          requests: {cpu: 50m}
  replicas: 1
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  annotations:
    helm.sh/resource-policy: keep
  labels:
    helm.sh/chart: vip-allocator-0.1.0
  name: ips.paas.org
spec:
  group: paas.org
`

func diff(t *testing.T, b, c string) []string {
	t.Helper()
	d, err := Diff([]byte(b), []byte(c))
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func TestTheChartsAdditionsAreNoDrift(t *testing.T) {
	if d := diff(t, bundle, chart); len(d) > 0 {
		t.Fatalf("the chart's labels and annotation count as drift: %q", d)
	}
}

func TestDriftIsCaught(t *testing.T) {
	for _, tc := range []struct {
		name, chart string
		want        []string
	}{
		{"a changed field", strings.Replace(chart, "cpu: 50m", "cpu: 60m", 1),
			[]string{"apps/v1 Deployment ns/op .spec.template.spec.containers[0].resources.requests.cpu: bundle 50m, chart 60m"}},
		{"a flag more", strings.Replace(chart, `"--leader-elect"]`, `"--leader-elect", "--workers=4"]`, 1),
			[]string{"apps/v1 Deployment ns/op .spec.template.spec.containers[0].args: bundle - operator; - --leader-elect, chart - operator; - --leader-elect; - --workers=4"}},
		{"a field more", strings.Replace(chart, "  replicas: 1", "  replicas: 1\n  paused: true", 1),
			[]string{"apps/v1 Deployment ns/op .spec.paused: bundle (none), chart true"}},
		{"another image", strings.Replace(chart, "reg/op:1.0", "reg/op:1.1", 1),
			[]string{"apps/v1 Deployment ns/op .spec.template.spec.containers[0].image: bundle reg/op:1.0, chart reg/op:1.1"}},
		{"a label of the chart's own beyond the allowed ones", strings.Replace(chart, "    app.kubernetes.io/managed-by: Helm\n    app.kubernetes.io/name: op", "    app.kubernetes.io/managed-by: Helm\n    app.kubernetes.io/name: op\n    tier: ops", 1),
			[]string{"apps/v1 Deployment ns/op .metadata.labels.tier: bundle (none), chart ops"}},
		{"an object less", strings.Replace(chart, "kind: ServiceAccount", "kind: ConfigMap", 1),
			[]string{"v1 ServiceAccount ns/op: in the bundle, not in the chart", "v1 ConfigMap ns/op: in the chart, not in the bundle"}},
		{"another namespace", strings.ReplaceAll(chart, "namespace: ns", "namespace: other"),
			[]string{"apps/v1 Deployment ns/op: in the bundle, not in the chart", "v1 ServiceAccount ns/op: in the bundle, not in the chart",
				"apps/v1 Deployment other/op: in the chart, not in the bundle", "v1 ServiceAccount other/op: in the chart, not in the bundle"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := diff(t, bundle, tc.chart)
			if !slices.Equal(got, tc.want) {
				t.Fatalf("differences\n got %q\nwant %q", got, tc.want)
			}
		})
	}
}

// A label the bundle sets itself is compared, even one the chart may add.
func TestBundlesOwnLabelsAreCompared(t *testing.T) {
	b := strings.Replace(bundle, "    app.kubernetes.io/name: op", "    app.kubernetes.io/name: op\n    app.kubernetes.io/part-of: paas", 1)
	c := strings.Replace(chart, "    app.kubernetes.io/name: op", "    app.kubernetes.io/name: op\n    app.kubernetes.io/part-of: vip-allocator", 1)
	want := []string{"apps/v1 Deployment ns/op .metadata.labels.app.kubernetes.io/part-of: bundle paas, chart vip-allocator"}
	if got := diff(t, b, c); !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}
