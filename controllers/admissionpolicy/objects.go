package admissionpolicy

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// bundleNamespace is the namespace config/ names the operator's and the agents'
// ServiceAccounts in; Objects rewrites it to the install namespace.
const bundleNamespace = "system:serviceaccount:" + paasv1.DefaultNamespace + ":"

// Objects reads the policies and bindings of files, naming the
// ServiceAccounts of namespace instead of the bundle's. Every policy in
// config/admission names them the same way ('system:serviceaccount:<ns>:<name>'),
// so any new one is moved along without code.
func Objects(files fs.FS, namespace string) ([]*unstructured.Unstructured, error) {
	names, err := fs.Glob(files, "*.yaml")
	if err != nil {
		return nil, err
	}
	var out []*unstructured.Unstructured
	for _, name := range names {
		data, err := fs.ReadFile(files, name)
		if err != nil {
			return nil, err
		}
		data = bytes.ReplaceAll(data, []byte(bundleNamespace), []byte("system:serviceaccount:"+namespace+":"))
		dec := utilyaml.NewYAMLOrJSONDecoder(bytes.NewReader(data), 4096)
		for {
			obj := &unstructured.Unstructured{}
			if err := dec.Decode(&obj.Object); err != nil {
				if errors.Is(err, io.EOF) {
					break
				}
				return nil, fmt.Errorf("read %s: %w", name, err)
			}
			if !strings.HasPrefix(obj.GetAPIVersion(), "admissionregistration.k8s.io/") {
				continue // kustomization.yaml
			}
			out = append(out, obj)
		}
	}
	return out, nil
}
