// Package nodeagent is the per-node agent's process: Server wires the data
// path (package proxy), the announcer (package announce), the liveness gossip
// (package gossip) and this node's published view (package nodes) into one
// manager, starts them, and stops them by the shutdown protocol (shutdown.go:
// Draining or Restarting, told to the other agents first). It keeps the rules
// when it stops for a restart or an upgrade (traffic must not stop) and
// removes them, as `vip-allocator agent cleanup` does, only when it is being
// uninstalled (teardown.go).
//
// It decides nothing about Services or VIPs itself: what is carried is the
// trust rule's (package trust), how it is forwarded the data path's, who
// answers for it the announcer's.
package nodeagent
