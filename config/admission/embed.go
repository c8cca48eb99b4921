// Package admission holds the ValidatingAdmissionPolicies of config/admission
// for the operator binary: an OLM bundle cannot carry them (OLM installs only
// the kinds operator-registry supports, and ValidatingAdmissionPolicy is none),
// so under OLM an administrator applies them (deploy/admission-policies.yaml)
// and the operator checks that they are in force for its own namespace
// (controllers/admissionpolicy). kustomize reads the same files for
// deploy/bundle.yaml and deploy/admission-policies.yaml.
package admission

import "embed"

// Files are the policy files (and kustomization.yaml, which has no kind).
//
//go:embed *.yaml
var Files embed.FS
