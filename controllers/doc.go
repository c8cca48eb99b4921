// Package controllers holds the operator's reconcilers. The Service reconciler
// allocates each LoadBalancer Service its addresses from the IPGroups that
// admit it, records them in the ledger (one IP object per address) and writes
// status.loadBalancer.ingress; the IPGroup reconciler reports how full each
// group is, whether it can be announced and which Services keep addresses it
// no longer allows, and protects a group from which Services hold addresses;
// the agent reconcilers deploy and configure the node agents. What to allocate
// is decided by internal/allocator; this package observes, asks it and applies.
// It does not program any node: the agents do (nodeagent).
package controllers
