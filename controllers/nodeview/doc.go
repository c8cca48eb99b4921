// Package nodeview is the reconciler that keeps the NodeView of every node
// what internal/nodeview makes of its Node: it creates each view and copies
// the Node's part (labels, cordon, deletion, addresses) at once, and leaves a
// change of the interfaces alone to the node's own agent for a grace first.
//
// It writes NodeViews only; it must never write a Node.
package nodeview
