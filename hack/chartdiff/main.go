// Command chartdiff checks that the Helm chart installs what the bundle files
// install: it reads the chart's rendering ('helm template') on stdin and the
// bundle files named as arguments, and prints every object that one has and
// the other has not, and every field where an object differs. The only
// differences allowed are what the chart adds to each object's own metadata
// (chartLabels, chartAnnotations) where the bundle's object has no such key.
// 'make verify' runs it with the chart's defaults against deploy/bundle.yaml
// (and with monitoring.enabled and openshift.scc against the files they stand for):
//
//	bin/helm template vip-allocator charts/vip-allocator -n vip-allocator-operator |
//	  go run ./hack/chartdiff deploy/bundle.yaml
//
// It exits 1 on a difference, 2 on a file it cannot read.
package main

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// chartLabels and chartAnnotations are what the chart adds to the metadata of
// the objects it renders.
var (
	chartLabels = []string{
		"helm.sh/chart", "app.kubernetes.io/managed-by", "app.kubernetes.io/instance",
		"app.kubernetes.io/part-of", "app.kubernetes.io/version",
	}
	chartAnnotations = []string{"helm.sh/resource-policy"}
)

func main() {
	if len(os.Args) < 2 {
		fmt.Fprintln(os.Stderr, "usage: helm template ... | chartdiff BUNDLE.yaml [MORE.yaml...]")
		os.Exit(2)
	}
	chart, err := io.ReadAll(os.Stdin)
	if err != nil {
		fail(2, err)
	}
	var bundle []byte
	for _, f := range os.Args[1:] {
		data, err := os.ReadFile(f)
		if err != nil {
			fail(2, err)
		}
		bundle = append(append(bundle, "\n---\n"...), data...)
	}
	diffs, err := Diff(bundle, chart)
	if err != nil {
		fail(2, err)
	}
	if len(diffs) > 0 {
		fmt.Fprintf(os.Stderr, "the chart's rendering differs from %s:\n", strings.Join(os.Args[1:], " + "))
		for _, d := range diffs {
			fmt.Fprintln(os.Stderr, "  "+d)
		}
		fmt.Fprintln(os.Stderr, "the chart's templates are generated from config/ by 'make bundle-yaml' (hack/chart), its values in charts/vip-allocator/values.yaml are written by hand")
		os.Exit(1)
	}
}

func fail(code int, err error) {
	fmt.Fprintln(os.Stderr, "chartdiff:", err)
	os.Exit(code)
}

// Diff lists the differences between the bundle's objects and the chart's,
// after taking out what the chart adds; none means the chart installs the bundle.
func Diff(bundle, chart []byte) ([]string, error) {
	b, err := objects(bundle)
	if err != nil {
		return nil, fmt.Errorf("bundle: %w", err)
	}
	c, err := objects(chart)
	if err != nil {
		return nil, fmt.Errorf("chart: %w", err)
	}
	var out []string
	for _, k := range sortedKeys(b) {
		co, ok := c[k]
		if !ok {
			out = append(out, k+": in the bundle, not in the chart")
			continue
		}
		bo := b[k]
		withoutChartMetadata(co, bo)
		out = append(out, fieldDiffs(k, "", bo, co)...)
	}
	for _, k := range sortedKeys(c) {
		if _, ok := b[k]; !ok {
			out = append(out, k+": in the chart, not in the bundle")
		}
	}
	return out, nil
}

// objects reads a multi-document YAML stream into objects by kind, namespace and name.
func objects(data []byte) (map[string]map[string]any, error) {
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	out := map[string]map[string]any{}
	for {
		var o map[string]any
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, err
		}
		if len(o) == 0 {
			continue
		}
		meta, _ := o["metadata"].(map[string]any)
		kind, _ := o["kind"].(string)
		api, _ := o["apiVersion"].(string)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		k := fmt.Sprintf("%s %s %s/%s", api, kind, ns, name)
		if kind == "" || name == "" {
			return nil, fmt.Errorf("an object without kind or name: %v", o)
		}
		if _, dup := out[k]; dup {
			return nil, fmt.Errorf("%s twice", k)
		}
		out[k] = o
	}
}

// withoutChartMetadata removes from the chart's object c the labels and
// annotations the chart adds, where the bundle's object b has no such key.
func withoutChartMetadata(c, b map[string]any) {
	cm, _ := c["metadata"].(map[string]any)
	bm, _ := b["metadata"].(map[string]any)
	for field, keys := range map[string][]string{"labels": chartLabels, "annotations": chartAnnotations} {
		cv, _ := cm[field].(map[string]any)
		bv, _ := bm[field].(map[string]any)
		for _, k := range keys {
			if _, inBundle := bv[k]; !inBundle {
				delete(cv, k)
			}
		}
		if cv != nil && len(cv) == 0 && bv == nil {
			delete(cm, field)
		}
	}
}

// fieldDiffs lists the paths at which b and c differ.
func fieldDiffs(obj, path string, b, c any) []string {
	if reflect.DeepEqual(b, c) {
		return nil
	}
	bm, bok := b.(map[string]any)
	cm, cok := c.(map[string]any)
	if bok && cok {
		var out []string
		keys := map[string]bool{}
		for k := range bm {
			keys[k] = true
		}
		for k := range cm {
			keys[k] = true
		}
		for _, k := range sortedKeys(keys) {
			out = append(out, fieldDiffs(obj, path+"."+k, bm[k], cm[k])...)
		}
		return out
	}
	bl, bok := b.([]any)
	cl, cok := c.([]any)
	if bok && cok && len(bl) == len(cl) {
		var out []string
		for i := range bl {
			out = append(out, fieldDiffs(obj, fmt.Sprintf("%s[%d]", path, i), bl[i], cl[i])...)
		}
		return out
	}
	return []string{fmt.Sprintf("%s %s: bundle %s, chart %s", obj, path, show(b), show(c))}
}

func show(v any) string {
	if v == nil {
		return "(none)"
	}
	data, err := yaml.Marshal(v)
	if err != nil {
		return fmt.Sprint(v)
	}
	s := strings.TrimSpace(string(data))
	if strings.Contains(s, "\n") {
		s = strings.ReplaceAll(s, "\n", "; ")
	}
	if len(s) > 200 {
		s = s[:200] + "..."
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return slices.Clip(keys)
}
