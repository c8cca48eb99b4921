// Command chart writes the generated part of the Helm chart charts/vip-allocator
// from the install files config/ renders, so that the chart and the bundle have
// one source: every object of deploy/bundle.yaml (and of deploy/monitoring.yaml
// and the OpenShift additions of deploy/bundle-openshift.yaml, each behind a
// value) becomes a template, with
//
//   - the namespace the bundle names (its objects', its bindings' subjects',
//     and the ServiceAccounts its admission policies name) made the release's;
//   - the chart's labels added to every object's own labels;
//   - the operator's image, extra flags, replicas, resources, scheduling and
//     pod annotations, and the ServiceAccounts' image pull secrets made values
//     (templates/_helpers.tpl, written by hand, turns values into flags);
//   - CRDs kept by 'helm uninstall' (helm.sh/resource-policy: keep).
//
// It also writes the image config/manager names into values.yaml (image.repository,
// image.tag, image.digest), and its tag into Chart.yaml's appVersion. hack/bundle.sh runs it after rendering deploy/
// ('make bundle-yaml'), from the repository root:
//
//	go run ./hack/chart [-deploy deploy] [-chart charts/vip-allocator]
//
// hack/chartdiff checks the result: the chart's default rendering is the bundle
// plus the chart's labels.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// bundleNamespace is the namespace config/ installs into (api/v1
// DefaultNamespace; TestBundleNamespace keeps them equal).
const bundleNamespace = "vip-allocator-operator"

// nsMark stands for the release's namespace until the objects are text.
const nsMark = "@@NAMESPACE@@"

// object is one manifest object as a generic map.
type object map[string]any

func (o object) kind() string { s, _ := o["kind"].(string); return s }
func (o object) name() string { s, _ := o.meta()["name"].(string); return s }
func (o object) meta() map[string]any {
	m, _ := o["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		o["metadata"] = m
	}
	return m
}

// file is one generated template: its objects, each under a condition (a
// template expression; empty: always rendered).
type file struct {
	name, doc string
	objs      []object
	conds     []string
}

func main() {
	log.SetFlags(0)
	deploy := flag.String("deploy", "deploy", "directory of bundle.yaml, bundle-openshift.yaml and monitoring.yaml")
	chart := flag.String("chart", "charts/vip-allocator", "the chart's directory")
	flag.Parse()
	if err := run(*deploy, *chart); err != nil {
		log.Fatalf("hack/chart: %v", err)
	}
}

func run(deployDir, chartDir string) error {
	bundle, err := readObjects(filepath.Join(deployDir, "bundle.yaml"))
	if err != nil {
		return err
	}
	openshift, err := readObjects(filepath.Join(deployDir, "bundle-openshift.yaml"))
	if err != nil {
		return err
	}
	monitoring, err := readObjects(filepath.Join(deployDir, "monitoring.yaml"))
	if err != nil {
		return err
	}
	files, image, err := templates(bundle, openshift, monitoring)
	if err != nil {
		return err
	}
	dir := filepath.Join(chartDir, "templates")
	old, _ := filepath.Glob(filepath.Join(dir, "generated-*.yaml"))
	for _, f := range old {
		if err := os.Remove(f); err != nil {
			return err
		}
	}
	for _, f := range files {
		text, err := f.render()
		if err != nil {
			return fmt.Errorf("%s: %w", f.name, err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.name), []byte(text), 0o644); err != nil {
			return err
		}
	}
	if err := setImage(filepath.Join(chartDir, "values.yaml"), image); err != nil {
		return err
	}
	return setAppVersion(filepath.Join(chartDir, "Chart.yaml"), image)
}

// readObjects reads the objects of a multi-document YAML file.
func readObjects(path string) ([]object, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
	var out []object
	for {
		var o object
		if err := dec.Decode(&o); err != nil {
			if errors.Is(err, io.EOF) {
				return out, nil
			}
			return nil, fmt.Errorf("%s: %w", path, err)
		}
		if o != nil {
			out = append(out, o)
		}
	}
}

// key names an object in a bundle.
func key(o object) string {
	ns, _ := o.meta()["namespace"].(string)
	return o.kind() + " " + ns + "/" + o.name()
}

// templates sorts the install files' objects into the generated templates and
// returns the bundle's operator image.
func templates(bundle, openshift, monitoring []object) ([]*file, string, error) {
	crds := &file{name: "generated-crds.yaml", doc: "the CRDs, kept by 'helm uninstall' (crds.install)"}
	rbac := &file{name: "generated-rbac.yaml", doc: "ServiceAccounts, Roles, ClusterRoles and their bindings"}
	admission := &file{name: "generated-admission.yaml", doc: "the ValidatingAdmissionPolicies and their bindings"}
	operator := &file{name: "generated-operator.yaml", doc: "the operator's Deployment (it deploys the agent DaemonSet itself)"}
	services := &file{name: "generated-services.yaml", doc: "Services in front of the agents (explain reads their facts through services/proxy)"}
	osFile := &file{name: "generated-openshift.yaml", doc: "OpenShift: the agent's SecurityContextConstraints (openshift.scc)"}
	mon := &file{name: "generated-monitoring.yaml", doc: "prometheus-operator objects, the scrape permission and the Grafana dashboard (monitoring.enabled)"}
	var image string
	inBundle := map[string]bool{}
	for _, o := range bundle {
		inBundle[key(o)] = true
		switch o.kind() {
		case "CustomResourceDefinition":
			crds.add(o, ".Values.crds.install")
		case "ServiceAccount", "Role", "ClusterRole", "RoleBinding", "ClusterRoleBinding":
			rbac.add(o, "")
		case "ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding":
			admission.add(o, "")
		case "Deployment":
			if image != "" {
				return nil, "", fmt.Errorf("a second Deployment, %s: the chart knows one", o.name())
			}
			var err error
			if image, err = operatorDeployment(o); err != nil {
				return nil, "", err
			}
			operator.add(o, "")
		case "Service":
			services.add(o, "")
		default:
			return nil, "", fmt.Errorf("%s: no template for this kind (hack/chart)", key(o))
		}
	}
	for _, o := range openshift {
		if !inBundle[key(o)] {
			osFile.add(o, ".Values.openshift.scc")
		}
	}
	for _, o := range monitoring {
		cond := ".Values.monitoring.enabled"
		switch o.kind() {
		case "ConfigMap":
			cond += " .Values.monitoring.dashboard"
		case "ServiceMonitor":
			scrapeScheme(o)
		case "ClusterRoleBinding":
			subjects, _ := o["subjects"].([]any)
			if len(subjects) != 1 {
				return nil, "", fmt.Errorf("%s: want one subject (Prometheus' ServiceAccount)", key(o))
			}
			s := subjects[0].(map[string]any)
			s["name"], s["namespace"] = "@@V:prometheusName@@", "@@V:prometheusNamespace@@"
		}
		if strings.Contains(cond, " ") {
			cond = "and " + cond
		}
		mon.add(o, cond)
	}
	if image == "" {
		return nil, "", errors.New("the bundle has no operator Deployment")
	}
	return []*file{crds, rbac, admission, operator, services, osFile, mon}, image, nil
}

func (f *file) add(o object, cond string) {
	common(o)
	f.objs = append(f.objs, o)
	f.conds = append(f.conds, cond)
}

// common makes the namespace the release's, adds the chart's labels, and keeps CRDs.
func common(o object) {
	releaseNamespace(o)
	m := o.meta()
	labels, _ := m["labels"].(map[string]any)
	if labels == nil {
		labels = map[string]any{}
	}
	labels["@@T:labels@@"] = "@@T:labels@@"
	m["labels"] = labels
	if o.kind() == "CustomResourceDefinition" {
		ann, _ := m["annotations"].(map[string]any)
		if ann == nil {
			ann = map[string]any{}
		}
		ann["helm.sh/resource-policy"] = "keep"
		m["annotations"] = ann
	}
	if o.kind() == "ServiceAccount" {
		o["imagePullSecrets"] = "@@T:imagePullSecrets@@"
	}
}

// releaseNamespace replaces the bundle's namespace wherever it names one: a
// "namespace" field, and the ServiceAccount user names of the admission
// policies' expressions.
func releaseNamespace(v any) any {
	switch v := v.(type) {
	case object:
		return releaseNamespace(map[string]any(v))
	case map[string]any:
		for k, e := range v {
			if s, ok := e.(string); ok && k == "namespace" && s == bundleNamespace {
				v[k] = nsMark
				continue
			}
			v[k] = releaseNamespace(e)
		}
		return v
	case []any:
		for i, e := range v {
			v[i] = releaseNamespace(e)
		}
		return v
	case string:
		return strings.ReplaceAll(v, "system:serviceaccount:"+bundleNamespace+":", "system:serviceaccount:"+nsMark+":")
	}
	return v
}

// operatorDeployment makes the operator's settings values and returns its image.
func operatorDeployment(o object) (string, error) {
	spec, _ := o["spec"].(map[string]any)
	tmpl, _ := spec["template"].(map[string]any)
	pod, _ := tmpl["spec"].(map[string]any)
	containers, _ := pod["containers"].([]any)
	if len(containers) != 1 {
		return "", fmt.Errorf("deployment %s: want one container, found %d", o.name(), len(containers))
	}
	c := containers[0].(map[string]any)
	image, _ := c["image"].(string)
	if image == "" {
		return "", fmt.Errorf("deployment %s: no image", o.name())
	}
	// The bundle's arguments stay; the values add flags after them.
	args, _ := c["args"].([]any)
	var argLines []string
	for _, a := range args {
		b, err := yaml.Marshal([]any{a})
		if err != nil {
			return "", err
		}
		argLines = append(argLines, strings.TrimSpace(string(b)))
	}
	bundleArgs = argLines
	c["args"] = "@@T:args@@"
	c["image"] = "@@V:image@@"
	c["imagePullPolicy"] = "@@T:imagePullPolicy@@"
	c["resources"] = "@@T:resources@@"
	spec["replicas"] = "@@V:replicas@@"
	tmeta, _ := tmpl["metadata"].(map[string]any)
	if tmeta == nil {
		tmeta = map[string]any{}
		tmpl["metadata"] = tmeta
	}
	tmeta["annotations"] = "@@T:podAnnotations@@"
	for _, k := range []string{"priorityClassName", "nodeSelector", "tolerations", "affinity"} {
		if _, set := pod[k]; set {
			return "", fmt.Errorf("deployment %s sets %s, which the chart's values set", o.name(), k)
		}
		pod[k] = "@@T:" + k + "@@"
	}
	return image, nil
}

// bundleArgs are the operator's arguments in the bundle, as YAML list items.
var bundleArgs []string

// scrapeScheme makes a ServiceMonitor's scheme follow metrics.secure.
func scrapeScheme(o object) {
	spec, _ := o["spec"].(map[string]any)
	eps, _ := spec["endpoints"].([]any)
	for _, e := range eps {
		if m, ok := e.(map[string]any); ok && m["scheme"] == "https" {
			m["scheme"] = "@@V:scheme@@"
		}
	}
}

// values are the inline template expressions ("@@V:name@@").
var values = map[string]string{
	"image":               `{{ include "vip-allocator.image" . | quote }}`,
	"replicas":            `{{ .Values.operator.replicas }}`,
	"scheme":              `{{ ternary "https" "http" .Values.metrics.secure }}`,
	"prometheusName":      `{{ .Values.monitoring.prometheus.serviceAccount }}`,
	"prometheusNamespace": `{{ .Values.monitoring.prometheus.namespace }}`,
}

// blocks are the template lines that replace a field ("@@T:name@@"): given the
// text before the key (indentation, and "- " for a list item's first key),
// the key and the key's column.
var blocks = map[string]func(prefix, key string, col int) (string, error){
	"labels": func(_, _ string, col int) (string, error) {
		return fmt.Sprintf(`{{- include "vip-allocator.labels" . | nindent %d }}`, col), nil
	},
	"args": func(prefix, key string, col int) (string, error) {
		ind := strings.Repeat(" ", col)
		return prefix + key + ":\n" + ind + strings.Join(bundleArgs, "\n"+ind) +
			fmt.Sprintf("\n%s{{- with include \"vip-allocator.operatorArgs\" . }}{{ . | trimSuffix \"\\n\" | nindent %d }}{{ end }}", ind, col), nil
	},
	"resources":        with(".Values.operator.resources"),
	"podAnnotations":   with(".Values.operator.podAnnotations"),
	"nodeSelector":     with(".Values.operator.nodeSelector"),
	"tolerations":      with(".Values.operator.tolerations"),
	"affinity":         with(".Values.operator.affinity"),
	"imagePullSecrets": with(".Values.imagePullSecrets"),
	"priorityClassName": func(prefix, key string, col int) (string, error) {
		return scalarWith(prefix, key, col, ".Values.operator.priorityClassName")
	},
	"imagePullPolicy": func(prefix, key string, col int) (string, error) {
		return scalarWith(prefix, key, col, ".Values.image.pullPolicy")
	},
}

// with renders a field from a value (a map or a list) when the value is set.
func with(value string) func(prefix, key string, col int) (string, error) {
	return func(prefix, key string, col int) (string, error) {
		if strings.HasSuffix(prefix, "- ") {
			return "", fmt.Errorf("%s is the first field of a list item: it cannot be optional", key)
		}
		return fmt.Sprintf("%s{{- with %s }}\n%s%s:\n%s{{- toYaml . | nindent %d }}\n%[1]s{{- end }}",
			prefix, value, prefix, key, prefix, col+2), nil
	}
}

func scalarWith(prefix, key string, _ int, value string) (string, error) {
	if strings.HasSuffix(prefix, "- ") {
		return "", fmt.Errorf("%s is the first field of a list item: it cannot be optional", key)
	}
	return fmt.Sprintf("%s{{- with %s }}\n%s%s: {{ . }}\n%[1]s{{- end }}", prefix, value, prefix, key), nil
}

var (
	blockLine = regexp.MustCompile(`(?m)^( *(?:- )?)('?@@T:\w+@@'?|[\w.-]+): '?@@T:(\w+)@@'?$`)
	valueMark = regexp.MustCompile(`'?@@V:(\w+)@@'?`)
)

// render is the template file's text.
func (f *file) render() (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "{{- /* Generated from config/ by 'make bundle-yaml' (hack/chart): %s. Do not edit. */ -}}\n", f.doc)
	for i, o := range f.objs {
		data, err := yaml.Marshal(map[string]any(o))
		if err != nil {
			return "", err
		}
		text := string(data)
		// Braces of the bundle's own (alert annotations, dashboard legends)
		// are text to Helm.
		text = strings.ReplaceAll(text, "{{", `{{"{{"}}`)
		var errs []error
		text = blockLine.ReplaceAllStringFunc(text, func(line string) string {
			m := blockLine.FindStringSubmatch(line)
			prefix, k, name := m[1], m[2], m[3]
			if strings.HasPrefix(k, "'@@T:") || strings.HasPrefix(k, "@@T:") { // a mark in a key: the key goes
				k = ""
			}
			fn, ok := blocks[name]
			if !ok {
				errs = append(errs, fmt.Errorf("no block %q", name))
				return line
			}
			out, err := fn(prefix, k, len(prefix))
			if err != nil {
				errs = append(errs, fmt.Errorf("%s: %w", key(o), err))
			}
			return out
		})
		text = valueMark.ReplaceAllStringFunc(text, func(s string) string {
			name := valueMark.FindStringSubmatch(s)[1]
			v, ok := values[name]
			if !ok {
				errs = append(errs, fmt.Errorf("no value %q", name))
			}
			return v
		})
		text = strings.ReplaceAll(text, "'"+nsMark+"'", "{{ .Release.Namespace }}")
		text = strings.ReplaceAll(text, nsMark, "{{ .Release.Namespace }}")
		if err := errors.Join(errs...); err != nil {
			return "", err
		}
		if strings.Contains(text, "@@") {
			return "", fmt.Errorf("%s: a mark is left: %s", key(o), text)
		}
		if c := f.conds[i]; c != "" {
			fmt.Fprintf(&b, "{{- if %s }}\n---\n%s{{- end }}\n", c, text)
		} else {
			fmt.Fprintf(&b, "---\n%s", text)
		}
	}
	return b.String(), nil
}

// imageLines are the lines of values.yaml that name the image.
var imageLines = regexp.MustCompile(`(?m)^  repository: .*\n  tag: .*\n  digest: .*$`)

// setImage writes the bundle's image into values.yaml.
func setImage(path, image string) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	repo, tag, digest := image, "", ""
	if i := strings.Index(image, "@"); i >= 0 {
		repo, digest = image[:i], image[i+1:]
	} else if i := strings.LastIndex(image, ":"); i > strings.LastIndex(image, "/") {
		repo, tag = image[:i], image[i+1:]
	}
	if n := len(imageLines.FindAllIndex(data, -1)); n != 1 {
		return fmt.Errorf("%s: want one image block (repository, tag, digest lines), found %d", path, n)
	}
	lines := fmt.Sprintf("  repository: %s\n  tag: %q\n  digest: %q", repo, tag, digest)
	out := imageLines.ReplaceAll(data, []byte(lines))
	if slices.Equal(out, data) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}

var appVersionLine = regexp.MustCompile(`(?m)^appVersion: .*$`)

// setAppVersion makes Chart.yaml's appVersion the image's tag (a digest leaves it).
func setAppVersion(path, image string) error {
	i := strings.LastIndex(image, ":")
	if strings.Contains(image, "@") || i < strings.LastIndex(image, "/") {
		return nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	if len(appVersionLine.FindAllIndex(data, -1)) != 1 {
		return fmt.Errorf("%s: want one appVersion line", path)
	}
	out := appVersionLine.ReplaceAll(data, []byte(fmt.Sprintf("appVersion: %q", image[i+1:])))
	if slices.Equal(out, data) {
		return nil
	}
	return os.WriteFile(path, out, 0o644)
}
