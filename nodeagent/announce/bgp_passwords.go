package announce

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// +kubebuilder:rbac:groups="",resources=secrets,verbs=get,resourceNames=vip-allocator-bgp-passwords,namespace=vip-allocator-operator

// BGPPasswords reads the BGP peers' passwords from the Secret the operator
// fills, at most every few seconds: every announce pass asks. It reads the
// API server directly: the agent caches no Secret, and may read only this one.
//
// A failed read (the API server down or slow, a control-plane upgrade)
// returns the last passwords read, with the error: a session must not drop
// because the agent could not ask. Only a read that succeeds changes them,
// and a peer missing from it (or the Secret not found) has no password.
func BGPPasswords(c client.Reader, namespace string) func(context.Context) (map[string]string, error) {
	return bgpPasswordsEvery(c, namespace, 5*time.Second)
}

// bgpPasswordsEvery is BGPPasswords reading at most once per every.
func bgpPasswordsEvery(c client.Reader, namespace string, every time.Duration) func(context.Context) (map[string]string, error) {
	var (
		mu      sync.Mutex
		read    time.Time
		current map[string]string // nil until a read succeeds
	)
	return func(ctx context.Context) (map[string]string, error) {
		mu.Lock()
		defer mu.Unlock()
		if time.Since(read) < every {
			return current, nil
		}
		var s corev1.Secret
		key := client.ObjectKey{Namespace: namespace, Name: paasv1.BGPPasswordsSecret}
		err := c.Get(ctx, key, &s)
		if err != nil && !apierrors.IsNotFound(err) {
			// Asked again on the next pass; the last good answer stands.
			return current, fmt.Errorf("read Secret %s: %w", key, err)
		}
		// Not found: no password copied yet, which is an answer too (cached
		// like one, so a peer waiting for its Secret costs no GET per pass).
		current = map[string]string{}
		for peer, pw := range s.Data {
			current[peer] = string(pw)
		}
		read = time.Now()
		return current, nil
	}
}
