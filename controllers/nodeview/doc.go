// Package nodeview is the reconciler that publishes the NodeView of every
// node whose view is missing or outdated for longer than a grace, as the
// node's own agent would (internal/nodeview.Publish): during a rolling
// upgrade, agents of an earlier release publish none.
//
// It writes NodeViews only, and leaves each to its node's agent for the
// grace first; it must never write a Node.
package nodeview
