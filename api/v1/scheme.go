package v1

import (
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
)

// NewScheme knows the built-in kinds and ours: what the operator, the agent, the migrate
// commands and the tests all read and write.
func NewScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := clientgoscheme.AddToScheme(s); err != nil {
		panic(err)
	}
	if err := AddToScheme(s); err != nil {
		panic(err)
	}
	return s
}
