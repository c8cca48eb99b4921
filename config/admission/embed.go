// Package admission holds the ValidatingAdmissionPolicies of config/admission
// for the operator binary: an OLM bundle cannot carry them (OLM installs only
// the kinds operator-registry supports, and ValidatingAdmissionPolicy is none),
// so under OLM the operator applies them itself, for its own namespace
// (controllers.AdmissionPolicies). kustomize reads the same files for
// deploy/bundle.yaml.
package admission

import "embed"

// Files are the policy files (and kustomization.yaml, which has no kind).
//
//go:embed *.yaml
var Files embed.FS
