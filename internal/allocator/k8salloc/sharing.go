package k8salloc

import (
	"fmt"
	"slices"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
	"github.com/paas-org/vip-allocator-operator/internal/allocator"
)

// sharingKeyAnnotations are the annotations that name a sharing key: ours
// first, then MetalLB's and Cilium's, honoured alike.
var sharingKeyAnnotations = []string{
	paasv1.SharingKeyAnnotation,
	paasv1.MetalLBSharingAnnotation,
	paasv1.MetalLBLegacySharingAnnotation,
	paasv1.CiliumSharingKeyAnnotation,
}

var crossNamespaceAnnotations = []string{
	paasv1.SharingCrossNamespaceAnnotation,
	paasv1.CiliumSharingCrossNamespaceAnnotation,
}

// maxCrossNamespaces bounds the namespaces a Service may list: every
// allocation compares the lists.
const maxCrossNamespaces = 64

// SharingOf reads how svc may share its address: the sharing key (any of the
// annotations above; several must agree), the namespaces it admits, its ports
// and, with externalTrafficPolicy Local, the endpoints it selects (its
// namespace and selector, sorted: a selector picks Pods of the Service's own
// namespace only; a Service without one selects endpoints nobody else can
// name, so it shares with no other Local Service). A value that is no valid
// key is refused with what to write.
func SharingOf(svc *corev1.Service) (allocator.Sharing, error) {
	key, keyFrom, err := agreed(svc, sharingKeyAnnotations)
	if err != nil || key == "" {
		return allocator.Sharing{}, err
	}
	if errs := validation.IsValidLabelValue(key); len(errs) > 0 {
		return allocator.Sharing{}, fmt.Errorf("annotation %s: %q is not a sharing key; write at most 63 letters, digits, '-', '_' or '.', beginning and ending with a letter or digit", keyFrom, clip(key))
	}
	s := allocator.Sharing{Key: key, Namespace: svc.Namespace}
	cross, crossFrom, err := agreed(svc, crossNamespaceAnnotations)
	if err != nil {
		return allocator.Sharing{}, err
	}
	for _, ns := range SplitList(cross) {
		if ns != "*" && len(validation.IsDNS1123Label(ns)) > 0 {
			return allocator.Sharing{}, fmt.Errorf("annotation %s: %q is not a namespace; write namespace names separated by commas, or \"*\" for every namespace", crossFrom, clip(ns))
		}
		if !slices.Contains(s.CrossNamespace, ns) {
			s.CrossNamespace = append(s.CrossNamespace, ns)
		}
	}
	if len(s.CrossNamespace) > maxCrossNamespaces {
		return allocator.Sharing{}, fmt.Errorf("annotation %s lists %d namespaces; list at most %d, or write \"*\"", crossFrom, len(s.CrossNamespace), maxCrossNamespaces)
	}
	for _, p := range svc.Spec.Ports {
		proto := string(p.Protocol)
		if proto == "" {
			proto = string(corev1.ProtocolTCP)
		}
		s.Ports = append(s.Ports, allocator.Port{Protocol: proto, Port: p.Port})
	}
	if svc.Spec.ExternalTrafficPolicy == corev1.ServiceExternalTrafficPolicyLocal {
		if len(svc.Spec.Selector) == 0 {
			s.LocalEndpoints = "the endpoints of Service " + svc.Namespace + "/" + svc.Name
		} else {
			s.LocalEndpoints = "selector " + labels.SelectorFromSet(svc.Spec.Selector).String() + " in namespace " + svc.Namespace
		}
	}
	return s, nil
}

// agreed is the one value the annotations of names on svc give, and which of
// them gave it; they must not disagree.
func agreed(svc *corev1.Service, names []string) (value, from string, err error) {
	for _, name := range names {
		v, ok := svc.Annotations[name]
		if !ok {
			continue
		}
		v = strings.TrimSpace(v)
		if from != "" && v != value {
			return "", "", fmt.Errorf("annotations %s=%q and %s=%q disagree; give them one value, or keep one of them", from, clip(value), name, clip(v))
		}
		value, from = v, name
	}
	return value, from, nil
}
