// Package migration moves a cluster onto vip-allocator from what served its addresses before.
// It holds three migrations that share only the package: each reads the cluster once into a
// plain snapshot, a pure function decides from it, and a thin layer writes the decision.
// None touches the allocator's memory or writes the ledger: the operator's Service
// controller does that when a Service asks for the address (controllers/). Of this
// module the package imports api/v1 (names, predicates), internal/allocator and
// internal/allocator/k8salloc (how a Service and an IPGroup read as allocator input),
// internal/ingress (a Service's ingress addresses) and internal/lbclass (which Services
// vip-allocator serves); k8salloc brings in internal/election. It imports neither
// controllers nor nodeagent.
//
// Legacy VirtualIPs (the operator's reconciler, and "vip-allocator migrate plan" and
// "migrate all"): converts a VirtualIP that carries virtualips.paas.org/migrate (its
// keepalived clone Service, its GroupSegmentMapping) into a LoadBalancer Service that keeps
// the address, one VirtualIP at a time.
//
//   - decide.go: Observed (the snapshot), Decide (pure: the one next Action, or a refusal
//     Reason that names the fix), the Actions in order.
//   - ipgroup.go: which IPGroup will hold the address, existing or created from the
//     GroupSegmentMapping (never a second group over a covered segment).
//   - plan.go: PlanFor runs Decide forward on a copy, for what a migration will do.
//   - reconciler.go, setup.go, metrics.go: Observe, the Reconciler that makes at most one
//     write per reconcile (so a crash between writes is finished by the next run), its
//     indexes and watches, its metrics. The Service controller takes the address over from
//     the VirtualIP while it is Migrating (controllers/virtualip_takeover.go).
//   - bulk.go: PlanAll, PrintPlans and AnnotateAll for a whole cluster.
//
// The original paas.org operator ("vip-allocator migrate upgrade"): installing over it leaves
// its Deployment, webhook and cluster-admin binding behind, which the upgrade removes; the
// operator itself owns the original's ledger objects and drops its Service finalizers
// (controllers/original.go).
//
//   - upgrade.go: Installation (the snapshot), PlanUpgrade (pure: what to remove, which
//     ledger objects the operator will own, which finalizers it will drop, what is orphaned,
//     leaving alone whatever only resembles the original).
//   - upgrade_apply.go: ObserveInstallation, ApplyUpgrade (the removals), the printout.
//
// MetalLB ("vip-allocator migrate metallb plan" and "apply"): converts MetalLB's pools,
// advertisements and BGP peers into IPGroups and BGPPeers; the Services keep the addresses
// MetalLB wrote into their status, which the operator adopts
// (controllers/status_adoption.go).
//
//   - metallb_read.go: MetalLBState (the snapshot, read as unstructured: no MetalLB Go
//     dependency) parsed once into plain types.
//   - metallb_convert.go: ConvertMetalLB (pure: the MetalLBPlan, each Service's fate, and the
//     problems, each with its fix).
//   - metallb_existing.go, metallb_gossip.go: what the plan must not touch by resemblance
//     (MetalLB's controller, an existing IPGroup), and whether the speakers' gossip port
//     clashes with the agents'.
//   - metallb_apply.go, metallb_print.go: ReadMetalLB and ApplyMetalLB (which refuses while a
//     gossip port clashes), and the plan for a person.
package migration
