package nodeagent

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/apimachinery/pkg/watch"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
)

// An agent that stops must keep its rules when it is restarted or upgraded
// (traffic keeps flowing meanwhile) and remove them when it is uninstalled
// (nothing may be left behind). The pod cannot tell the two apart from the
// signal alone, so on the way out it asks the API server about its DaemonSet:
// the operator makes the agent's ServiceAccount the DaemonSet's owner, so
// deleting the bundle (or the OLM CSV) deletes the ServiceAccount, whose tokens
// then stop working, and the garbage collector deletes the DaemonSet, which
// stops the pods.
//
// By the time the pod stops, its token is therefore refused (401). A refused
// token alone proves nothing, though: an expired token, an authenticator
// outage or a misconfigured API server say 401 too, and removing the rules
// then would cut every VIP's traffic on the node. So the agent watches its
// DaemonSet while it runs (DeletionWatch): an open watch keeps delivering
// events after the ServiceAccount is gone, so it sees the garbage collector
// delete the DaemonSet before the pod is stopped. Only that, or a DaemonSet
// read as gone, being deleted or no longer meant for this node, removes the
// rules; a 401 or 403 without it keeps them.

// +kubebuilder:rbac:groups=apps,resources=daemonsets,verbs=get;list;watch,resourceNames=vip-allocator-agent,namespace=vip-allocator-operator

// StopVerdict says what a stopping agent does with its rules, and why.
type StopVerdict struct {
	Uninstall bool
	Why       string
	// Unsure is set when the API server's answer settles nothing (asking
	// again may): the rules are kept if it stays so.
	Unsure bool
}

// JudgeStop is the pure decision. ds and getErr are the result of reading the
// agent's DaemonSet as the agent; node is this node (nil when it could not be
// read); sawDeleted is whether the agent's watch saw the DaemonSet deleted.
// Anything unclear keeps the rules: an outage on a restart is worse than
// rules left behind, which `vip-allocator agent cleanup` removes.
func JudgeStop(ds *appsv1.DaemonSet, getErr error, node *corev1.Node, sawDeleted bool) StopVerdict {
	authErr := apierrors.IsUnauthorized(getErr) || apierrors.IsForbidden(getErr)
	switch {
	case apierrors.IsNotFound(getErr):
		return StopVerdict{true, "the agent DaemonSet is gone", false}
	case authErr && sawDeleted:
		return StopVerdict{true, "the agent's token is refused (" + reasonOf(getErr) + ") and its DaemonSet was seen deleted: an uninstall (ServiceAccount deleted)", false}
	case getErr != nil:
		// Forbidden is what an uninstall looks like for up to 10 s (the Role
		// is gone while the API server still accepts the cached token), then
		// Unauthorized; but both are also what an expired token or an
		// authentication outage look like. Unconfirmed, they keep the rules.
		return StopVerdict{false, fmt.Sprintf("cannot tell an uninstall from a restart (%v): rules kept; run 'vip-allocator agent cleanup' on the node if it was an uninstall", getErr), true}
	case ds.DeletionTimestamp != nil:
		return StopVerdict{true, "the agent DaemonSet is being deleted", false}
	case node != nil && !labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector).Matches(labels.Set(node.Labels)):
		return StopVerdict{true, fmt.Sprintf("the agent DaemonSet no longer runs on node %s (node selector %s)", node.Name, labels.SelectorFromSet(ds.Spec.Template.Spec.NodeSelector)), false}
	default:
		return StopVerdict{false, "the agent DaemonSet still runs here: a restart or an upgrade, rules kept", false}
	}
}

// ParseDaemonSet reads the --daemonset flag, "namespace/name".
func ParseDaemonSet(s string) (types.NamespacedName, error) {
	ns, name, ok := strings.Cut(s, "/")
	if !ok || ns == "" || name == "" || strings.Contains(name, "/") {
		return types.NamespacedName{}, fmt.Errorf("--daemonset %q: want namespace/name", s)
	}
	return types.NamespacedName{Namespace: ns, Name: name}, nil
}

// StopPatience is how long a stopping agent keeps asking while the answers
// settle nothing: longer than the API server caches a token (10 s), shorter
// than the pod's grace period (30 s), so the cleanup still fits.
var StopPatience = 15 * time.Second

const stopRetryInterval = time.Second

func reasonOf(err error) string {
	if apierrors.IsUnauthorized(err) {
		return "401 Unauthorized"
	}
	return "403 Forbidden"
}

// TeardownIfUninstalled runs cleanup when the agent of nodeName, deployed by
// the DaemonSet daemonSet, is being uninstalled, and reports what it decided.
// c must be a live client (not the stopped manager's cache); seen is the
// agent's DeletionWatch of daemonSet (nil: none ran).
func TeardownIfUninstalled(c client.Reader, daemonSet types.NamespacedName, nodeName string, seen *DeletionWatch, cleanup func() error) (StopVerdict, error) {
	ctx, cancel := context.WithTimeout(context.Background(), StopPatience)
	defer cancel()
	v := askOnce(ctx, c, daemonSet, nodeName, seen)
	for v.Unsure && ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-time.After(stopRetryInterval):
			v = askOnce(ctx, c, daemonSet, nodeName, seen)
		}
	}
	if !v.Uninstall {
		return v, nil
	}
	if err := cleanup(); err != nil {
		return v, fmt.Errorf("teardown (%s): %w", v.Why, err)
	}
	return v, nil
}

// askOnce reads the DaemonSet, and the node when the DaemonSet is there.
func askOnce(ctx context.Context, c client.Reader, daemonSet types.NamespacedName, nodeName string, seen *DeletionWatch) StopVerdict {
	ds := &appsv1.DaemonSet{}
	getErr := c.Get(ctx, daemonSet, ds)
	var node *corev1.Node
	if getErr == nil {
		// Without the node the selector check is skipped: not knowing keeps rules.
		n := &corev1.Node{}
		if err := c.Get(ctx, client.ObjectKey{Name: nodeName}, n); err == nil {
			node = n
		}
	}
	return JudgeStop(ds, getErr, node, seen.Seen())
}

// DeletionWatch watches one DaemonSet and remembers whether it last saw it
// deleted (or marked for deletion): a DaemonSet seen again since (deleted by
// hand, recreated by the operator) clears that. Its zero value, and nil, saw
// nothing.
type DeletionWatch struct {
	seen atomic.Bool
}

// WatchDeletion watches daemonSet with c until ctx ends, re-watching when the
// API server closes the stream. A watch that cannot be reopened (the token
// refused after an uninstall) leaves what was seen as it was.
func WatchDeletion(ctx context.Context, c client.WithWatch, daemonSet types.NamespacedName) *DeletionWatch {
	w := &DeletionWatch{}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		// A field selector on the name lets RBAC's resourceNames allow the watch.
		events, err := c.Watch(ctx, &appsv1.DaemonSetList{}, client.InNamespace(daemonSet.Namespace),
			client.MatchingFields{"metadata.name": daemonSet.Name})
		if err != nil {
			ctrl.LoggerFrom(ctx).V(1).Info("watch the agent DaemonSet", "error", err.Error())
			return
		}
		defer events.Stop()
		for e := range events.ResultChan() {
			ds, ok := e.Object.(*appsv1.DaemonSet)
			switch {
			case !ok:
			case e.Type == watch.Deleted:
				w.seen.Store(true)
			case e.Type == watch.Added || e.Type == watch.Modified:
				w.seen.Store(ds.DeletionTimestamp != nil)
			}
		}
	}, time.Second)
	return w
}

// Seen reports whether the DaemonSet was seen deleted.
func (w *DeletionWatch) Seen() bool {
	return w != nil && w.seen.Load()
}
