package ledger

import (
	"strings"

	"k8s.io/apimachinery/pkg/types"
)

// The allocator keys: who holds an address, as the operator's in-memory
// allocator names them. A Service's is "<namespace>/<name>"; the others
// contain a space, which no Service's can.

// legacyKeyPrefix starts every key of a legacy VirtualIP.
const legacyKeyPrefix = "VirtualIP "

// ServiceKey is the allocator key of the Service named svc.
func ServiceKey(svc types.NamespacedName) string { return svc.String() }

// LegacyKey is the allocator key of a legacy VirtualIP: never a Service's.
func LegacyKey(namespace, name string) string { return legacyKeyPrefix + namespace + "/" + name }

// ServiceOfKey names the Service key stands for; ok is false for the key of
// a legacy VirtualIP or of an unowned object.
func ServiceOfKey(key string) (svc types.NamespacedName, ok bool) {
	ns, name, found := strings.Cut(key, "/")
	if !found || strings.Contains(key, " ") {
		return types.NamespacedName{}, false
	}
	return types.NamespacedName{Namespace: ns, Name: name}, true
}

// VirtualIPOfKey is "<namespace>/<name>" of the legacy VirtualIP key stands
// for; ok is false for any other key.
func VirtualIPOfKey(key string) (string, bool) {
	return strings.CutPrefix(key, legacyKeyPrefix)
}
