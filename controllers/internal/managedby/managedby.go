// Package managedby is the label the operator puts on the objects it creates
// that no owner reference ties to it (the agent DaemonSet, the Secrets the
// agents read, the admission policies it applies), so a person, and the
// uninstall, can tell them apart. It only names the label; it never reads
// or writes an object.
package managedby

// Label is app.kubernetes.io/managed-by, and Operator its value on what the
// operator creates.
const (
	Label    = "app.kubernetes.io/managed-by"
	Operator = "vip-allocator-operator"
)
