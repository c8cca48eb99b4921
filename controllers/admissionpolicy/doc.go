// Package admissionpolicy keeps the admission policies of config/admission
// applied, with the ServiceAccounts they name moved to the operator's
// namespace, where no bundle brings them (OLM: --admission-policies). It is
// a manager Runnable, not a reconciler: it applies them at start and again
// every period.
//
// It applies only the policies and bindings of those files; it must never
// delete one, nor apply anything else.
package admissionpolicy
