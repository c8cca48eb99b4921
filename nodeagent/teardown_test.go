package nodeagent

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/fake"
)

func TestJudgeStop(t *testing.T) {
	dsResource := schema.GroupResource{Group: "apps", Resource: "daemonsets"}
	running := &appsv1.DaemonSet{}
	edgeOnly := &appsv1.DaemonSet{Spec: appsv1.DaemonSetSpec{Template: corev1.PodTemplateSpec{
		Spec: corev1.PodSpec{NodeSelector: map[string]string{"edge": "true"}}}}}
	deleting := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{DeletionTimestamp: &metav1.Time{}}}
	node := func(l map[string]string) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: l}}
	}
	for _, tc := range []struct {
		desc      string
		ds        *appsv1.DaemonSet
		err       error
		node      *corev1.Node
		seen      bool // the agent's watch saw the DaemonSet deleted
		uninstall bool
		why       string
	}{
		{"DaemonSet present: a restart or upgrade", running, nil, node(nil), false, false, "restart"},
		{"DaemonSet present, node unknown: keep", running, nil, nil, false, false, "restart"},
		{"DaemonSet deleted", nil, apierrors.NewNotFound(dsResource, "vip-allocator-agent"), nil, false, true, "gone"},
		{"DaemonSet being deleted (foreground)", deleting, nil, node(nil), false, true, "being deleted"},
		{"token refused after the watch saw the DaemonSet deleted: uninstall", nil, apierrors.NewUnauthorized("token"), nil, true, true, "seen deleted"},
		{"token refused, nothing seen (expired token, authenticator outage): keep", nil, apierrors.NewUnauthorized("token"), nil, false, false, "agent cleanup"},
		{"RBAC refuses after the watch saw the DaemonSet deleted: uninstall", nil, apierrors.NewForbidden(dsResource, "vip-allocator-agent", errors.New("no")), nil, true, true, "403 Forbidden"},
		{"RBAC refuses, nothing seen: unclear, keep", nil, apierrors.NewForbidden(dsResource, "vip-allocator-agent", errors.New("no")), nil, false, false, "agent cleanup"},
		{"API server unreachable: unclear, keep", nil, fmt.Errorf("dial tcp: connection refused"), nil, false, false, "connection refused"},
		{"API server unreachable, even after a deletion was seen: keep", nil, fmt.Errorf("dial tcp: connection refused"), nil, true, false, "connection refused"},
		{"API server overloaded: unclear, keep", nil, apierrors.NewServiceUnavailable("busy"), nil, false, false, "busy"},
		{"DaemonSet present although a deletion was seen (recreated): keep", running, nil, node(nil), true, false, "restart"},
		{"node selector still matches", edgeOnly, nil, node(map[string]string{"edge": "true"}), false, false, "restart"},
		{"node selector no longer matches this node", edgeOnly, nil, node(map[string]string{"edge": "false"}), false, true, "no longer runs on node n1"},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			v := JudgeStop(tc.ds, tc.err, tc.node, tc.seen)
			if v.Uninstall != tc.uninstall || !strings.Contains(v.Why, tc.why) {
				t.Fatalf("got %+v, want uninstall=%v and a reason with %q", v, tc.uninstall, tc.why)
			}
		})
	}
}

func TestParseDaemonSet(t *testing.T) {
	for in, want := range map[string]string{
		"vip-allocator-operator/vip-allocator-agent": "vip-allocator-operator/vip-allocator-agent",
		"vip-allocator-agent":                        "",
		"/vip-allocator-agent":                       "",
		"ns/":                                        "",
		"a/b/c":                                      "",
	} {
		got, err := ParseDaemonSet(in)
		if want == "" {
			if err == nil {
				t.Errorf("%q: want an error, got %v", in, got)
			}
			continue
		}
		if err != nil || got.String() != want {
			t.Errorf("%q: got %v, %v", in, got, err)
		}
	}
}

// flakyReader answers Forbidden a few times, then what its inner reader says:
// an uninstall as seen while the API server still accepts a cached token.
type flakyReader struct {
	client.Reader
	forbidden int
}

func (f *flakyReader) Get(ctx context.Context, key client.ObjectKey, obj client.Object, opts ...client.GetOption) error {
	if f.forbidden > 0 {
		f.forbidden--
		return apierrors.NewForbidden(schema.GroupResource{Group: "apps", Resource: "daemonsets"}, key.Name, errors.New("no Role"))
	}
	return f.Reader.Get(ctx, key, obj, opts...)
}

func TestTeardownAsksAgainWhileUnsure(t *testing.T) {
	key := types.NamespacedName{Namespace: "vip-allocator-operator", Name: "vip-allocator-agent"}
	saved := StopPatience
	defer func() { StopPatience = saved }()

	StopPatience = 10 * time.Second
	r := &flakyReader{Reader: fake.NewClientBuilder().Build(), forbidden: 2}
	cleaned := false
	v, err := TeardownIfUninstalled(r, key, "n1", nil, func() error { cleaned = true; return nil })
	if err != nil || !v.Uninstall || !cleaned {
		t.Fatalf("Forbidden, then NotFound: want an uninstall, got %+v cleaned=%v %v", v, cleaned, err)
	}

	StopPatience = 1500 * time.Millisecond
	r = &flakyReader{Reader: fake.NewClientBuilder().Build(), forbidden: 100}
	v, err = TeardownIfUninstalled(r, key, "n1", nil, func() error { t.Fatal("cleanup on an unsure answer"); return nil })
	if err != nil || v.Uninstall || !v.Unsure {
		t.Fatalf("Forbidden throughout: want the rules kept, got %+v %v", v, err)
	}
}

func TestTeardownIfUninstalledRunsCleanupOnlyOnUninstall(t *testing.T) {
	key := types.NamespacedName{Namespace: "vip-allocator-operator", Name: "vip-allocator-agent"}
	ds := &appsv1.DaemonSet{ObjectMeta: metav1.ObjectMeta{Namespace: key.Namespace, Name: key.Name}}
	n1 := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	for _, tc := range []struct {
		desc      string
		objects   []client.Object
		cleanErr  error
		cleaned   bool
		wantError bool
	}{
		{"restart: DaemonSet and node present", []client.Object{ds, n1}, nil, false, false},
		{"uninstall: no DaemonSet", []client.Object{n1}, nil, true, false},
		{"uninstall whose cleanup fails reports it", []client.Object{n1}, errors.New("iptables-restore: exit 4"), true, true},
	} {
		t.Run(tc.desc, func(t *testing.T) {
			c := fake.NewClientBuilder().WithObjects(tc.objects...).Build()
			cleaned := false
			v, err := TeardownIfUninstalled(c, key, "n1", nil, func() error { cleaned = true; return tc.cleanErr })
			if cleaned != tc.cleaned || v.Uninstall != tc.cleaned || (err != nil) != tc.wantError {
				t.Fatalf("cleaned=%v verdict=%+v err=%v", cleaned, v, err)
			}
			if tc.wantError && !strings.Contains(err.Error(), "teardown (the agent DaemonSet is gone)") {
				t.Fatalf("error does not name the step: %v", err)
			}
		})
	}
}

// refusingReader refuses every read as an API server does a token it no
// longer accepts.
type refusingReader struct{ client.Reader }

func (refusingReader) Get(context.Context, client.ObjectKey, client.Object, ...client.GetOption) error {
	return apierrors.NewUnauthorized("token has expired")
}

// TestTeardownKeepsRulesOnAnAuthenticationError: a 401 while the agent
// decides whether it is being uninstalled keeps the node's rules; only a
// confirmed uninstall (the watch saw the DaemonSet deleted) removes them.
func TestTeardownKeepsRulesOnAnAuthenticationError(t *testing.T) {
	key := types.NamespacedName{Namespace: "vip-allocator-operator", Name: "vip-allocator-agent"}
	saved := StopPatience
	defer func() { StopPatience = saved }()
	StopPatience = 1500 * time.Millisecond

	for _, w := range []*DeletionWatch{nil, {}} {
		v, err := TeardownIfUninstalled(refusingReader{}, key, "n1", w, func() error { t.Fatal("rules removed on a 401 alone"); return nil })
		if err != nil || v.Uninstall || !strings.Contains(v.Why, "rules kept") {
			t.Fatalf("401 throughout, no deletion seen: want the rules kept, got %+v %v", v, err)
		}
	}

	seen := &DeletionWatch{}
	seen.seen.Store(true)
	cleaned := false
	v, err := TeardownIfUninstalled(refusingReader{}, key, "n1", seen, func() error { cleaned = true; return nil })
	if err != nil || !v.Uninstall || !cleaned {
		t.Fatalf("401 after the DaemonSet was seen deleted: want the rules removed, got %+v cleaned=%v %v", v, cleaned, err)
	}
}
