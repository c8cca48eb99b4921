package nodeview

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	paasv1 "github.com/paas-org/vip-allocator-operator/api/v1"
)

// Publish keeps the NodeView of node what Of makes of it, through c (which
// reads the current view, from a cache or not). It writes only when that
// differs, so the kubelet's status reports, which change nothing the agents
// read, cost nothing; and since the view is a pure function of the Node, two
// publishers of one view (the node's agent and the operator) agree: whichever
// writes second finds nothing to change, or a conflict, after which it reads
// the view again. Nothing is published while node has no interfaces
// annotation (Of).
func Publish(ctx context.Context, c client.Client, node *corev1.Node) error {
	want, cur, err := compare(ctx, c, node)
	switch {
	case err != nil || want == nil:
		return err
	case cur == nil:
		if err := c.Create(ctx, want); err != nil {
			return fmt.Errorf("create NodeView %s: %w", node.Name, err)
		}
		return nil
	}
	cur.Spec, cur.OwnerReferences = want.Spec, want.OwnerReferences
	if err := c.Update(ctx, cur); err != nil {
		return fmt.Errorf("update NodeView %s: %w", node.Name, err)
	}
	return nil
}

// PublishInterfaces is Publish as a node's agent may do it
// (config/admission/agent_nodeview_writes.yaml): of the existing view of its
// own node only the interfaces (and the owner), never the labels, cordon,
// deletion or addresses, which the operator copies from the Node; a missing
// view is left for the operator to create.
func PublishInterfaces(ctx context.Context, c client.Client, node *corev1.Node) error {
	want, cur, err := compare(ctx, c, node)
	if err != nil || want == nil || cur == nil {
		return err
	}
	next, changed := AgentUpdate(cur, want)
	if !changed {
		return nil
	}
	if err := c.Update(ctx, next); err != nil {
		return fmt.Errorf("update the interfaces of NodeView %s: %w", node.Name, err)
	}
	return nil
}

// AgentUpdate is cur with want's interfaces and owners, and whether that
// differs from cur: the part of a view its node's agent writes.
func AgentUpdate(cur, want *paasv1.NodeView) (next *paasv1.NodeView, changed bool) {
	next = cur.DeepCopy()
	next.Spec.Interfaces, next.OwnerReferences = want.Spec.Interfaces, want.OwnerReferences
	return next, Differs(cur, next)
}

// Staleness says how a node's view differs from what Of makes of its Node,
// and so who writes it next.
type Staleness int

const (
	// Current means Publish would write nothing.
	Current Staleness = iota
	// InterfacesOnly means only the interfaces (and owner) differ, the part its
	// node's agent writes (PublishInterfaces), usually within milliseconds.
	InterfacesOnly
	// NodePart means the view is missing, or its labels, cordon, deletion or
	// addresses differ: the Node's part, which only the operator writes.
	NodePart
)

// Outdated tells how node's view differs from what Publish would write.
func Outdated(ctx context.Context, c client.Reader, node *corev1.Node) (Staleness, error) {
	want, cur, err := compare(ctx, c, node)
	switch {
	case err != nil || want == nil:
		return Current, err
	case cur == nil:
		return NodePart, nil
	}
	if next, _ := AgentUpdate(cur, want); Differs(next, want) {
		return NodePart, nil
	}
	return InterfacesOnly, nil
}

// compare returns the view node should have (nil: it has the right one, or
// publishes none) and the current one, read through c (nil: there is none).
func compare(ctx context.Context, c client.Reader, node *corev1.Node) (want, cur *paasv1.NodeView, err error) {
	want, ok := Of(node)
	if !ok {
		return nil, nil, nil
	}
	cur = &paasv1.NodeView{}
	err = c.Get(ctx, client.ObjectKey{Name: node.Name}, cur)
	switch {
	case apierrors.IsNotFound(err):
		return want, nil, nil
	case err != nil:
		return nil, nil, fmt.Errorf("get NodeView %s: %w", node.Name, err)
	case !Differs(cur, want):
		return nil, cur, nil
	}
	return want, cur, nil
}
