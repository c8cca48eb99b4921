//go:build envtest

package integration

import (
	"context"
	"fmt"
	"slices"
	"time"

	. "github.com/onsi/gomega"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

func watchMigration(l legacyVIP) *timeline {
	t := &timeline{stop: make(chan struct{}), done: make(chan struct{})}
	ctx := context.Background()
	poll := func() {
		vip, svc := &paasv1.VirtualIP{}, &corev1.Service{}
		if k8s.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: l.name}, vip) != nil ||
			k8s.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: l.service}, svc) != nil {
			return
		}
		cloneErr := k8s.Get(ctx, client.ObjectKey{Namespace: l.ns, Name: l.name + paasv1.CloneServiceSuffix}, &corev1.Service{})
		now := time.Now()
		t.mu.Lock()
		holds := slices.Equal(ingressIPs(svc), []string{l.ip})
		if holds && t.heldAt.IsZero() {
			t.heldAt = now
		}
		if !holds && !t.heldAt.IsZero() {
			t.lostAfter = append(t.lostAfter, fmt.Sprintf("%s: %v", now.Format(time.StampMilli), ingressIPs(svc)))
		}
		if apierrors.IsNotFound(cloneErr) && t.cloneGone.IsZero() {
			t.cloneGone = now
		}
		t.mu.Unlock()
	}
	// Every version of the VirtualIP, from a watch: states may last milliseconds.
	wc, err := client.NewWithWatch(env.AdminConfig, client.Options{Scheme: paasv1.NewScheme()})
	Expect(err).NotTo(HaveOccurred())
	w, err := wc.Watch(ctx, &paasv1.VirtualIPList{}, client.InNamespace(l.ns), client.MatchingFields{"metadata.name": l.name})
	Expect(err).NotTo(HaveOccurred())
	t.watchDone = make(chan struct{})
	go func() {
		defer close(t.watchDone)
		for ev := range w.ResultChan() {
			if vip, ok := ev.Object.(*paasv1.VirtualIP); ok {
				t.mu.Lock()
				if n := len(t.states); n == 0 || t.states[n-1] != vip.Status.State {
					t.states = append(t.states, vip.Status.State)
				}
				t.mu.Unlock()
			}
		}
	}()
	t.stopWatch = w.Stop
	poll()
	go func() {
		defer close(t.done)
		for {
			select {
			case <-t.stop:
				return
			case <-time.After(20 * time.Millisecond):
				poll()
			}
		}
	}()
	return t
}

func (t *timeline) finish() {
	close(t.stop)
	<-t.done
	t.stopWatch()
	<-t.watchDone
}
