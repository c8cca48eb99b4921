// Package admissionpolicy checks that the admission policies of
// config/admission are in force as shipped, for the operator's namespace,
// where no bundle brings them (OLM: an administrator applies them,
// docs/install.md). It reports a policy or binding that is missing or
// altered with a Warning Event and the metric
// vip_allocator_admission_policy_in_force. It is a manager Runnable, not a
// reconciler: it checks at start and again every period.
//
// It only reads, and only the policies and bindings of those files by name.
// It must never write one: those policies constrain the operator itself, and
// an identity that may write its constraints has none.
package admissionpolicy
