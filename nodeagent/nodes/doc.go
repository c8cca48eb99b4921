// Package nodes owns how the agent sees the cluster's nodes: it reads them
// from their NodeViews (and the few Nodes with no view), keeps the index the
// LAN-facing parts ask many times a second (MACs, InternalIPs), and publishes
// this node's own view and interfaces.
//
// It decides nothing about addresses: which addresses a node may hold is the
// trust rule's question, which node announces a VIP the announcer's.
package nodes
