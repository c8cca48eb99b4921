// Package ipgroup is the IPGroup reconciler: it reports on each IPGroup how
// full it is, whether its spec is usable, whether it overlaps another group,
// whether any node can announce it and send its replies back, and which
// Services keep addresses it no longer allows; and it protects a group from
// which Services hold addresses with a finalizer. It owns the catalog of
// parsed groups that maps a Node, peer, group or ledger event to the groups
// it touches.
//
// It writes the IPGroups' status and finalizer, and deletes a deleted group's
// records of addresses in use on the LAN; it must never allocate, nor write
// a Service or a ledger object that holds an address (package service).
package ipgroup
