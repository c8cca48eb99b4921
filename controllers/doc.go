// Package controllers holds the operator's reconcilers, one package each,
// as Cluster API lays them out; this package itself holds only the RBAC the
// operator needs in its own namespace (rbac.go).
//
//   - service: gives each LoadBalancer Service its addresses from the IPGroups
//     that admit it, records them in the ledger (one IP object per address)
//     and writes status.loadBalancer.ingress;
//   - ipgroup: reports how full each IPGroup is, whether it can be announced,
//     which Services keep addresses it no longer allows, and protects a group
//     from which Services hold addresses;
//   - bgppeer: reports each BGPPeer's sessions and hands the agents its password;
//   - lanrecord: deletes the records of addresses no longer in use on the LAN;
//   - nodeview: publishes the NodeViews no agent keeps;
//   - agent: deploys the node agents' DaemonSet;
//   - admissionpolicy: applies the admission policies where no bundle brings them.
//
// What they share is under internal/: the reserved addresses (reserved), the
// ledger's index by IPGroup (ledgerindex), event filters (predicates) and the
// managed-by label (managedby). The ledger's rules are internal/ledger's, the
// allocation internal/allocator's. Each reconciler is built the same way:
// exported fields Client (the manager's cached client), APIReader where it
// must read past the cache, Recorder where it records Events, and its
// options, then SetupWithManager. None programs a node: the agents do
// (nodeagent), and no package here imports nodeagent or migration.
package controllers
