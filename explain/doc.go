// Package explain answers "why does this Service's address (not) answer?" in
// one report: for a Service, an address, an IPGroup or a node, each step from
// allocation to announcement with ✓ or ✗ and a reason a person can act on.
//
// It is pure: Explain takes what was read once (Observed: the API objects and
// each agent's facts about its own node, package agentfacts) and returns a
// Report; Render prints it. The decisions it explains are never re-made here:
// which groups admit a Service is the allocator's NotAdmitted, which node
// carries a VIP and why the others do not is the election's Owner,
// Advertisers and NotEligible, the same functions the operator and the agents
// run. Reading the cluster and the agents is read.go's; cmd/ only wires flags.
package explain
