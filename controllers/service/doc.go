// Package service is the Service reconciler: it gives each LoadBalancer
// Service its addresses from the IPGroups that admit it, records each in the
// IP ledger (one IP object per address; creating it is the lock) and writes
// status.loadBalancer.ingress with the Service's conditions and Events. It
// owns the in-memory allocation state (the allocator behind a mutex, rebuilt
// from the cluster before the first allocation), and the ledger writes of a
// Service: creating, joining, leaving, owning the original operator's,
// taking over a legacy VirtualIP's, and marking reserved, claimed or
// adopted addresses.
//
// What to allocate is decided by internal/allocator, whose holder is read by
// internal/ledger's rules; this package observes, asks and applies. It must
// never write an IPGroup's status (package ipgroup) nor program or announce
// an address (the agents, nodeagent).
package service
