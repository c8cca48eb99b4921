// Package dataplane owns the node agent's packet-filter rules: it makes traffic to VIP:port
// of a Service reach one of its ready endpoints, DNATed straight to it, masqueraded with the
// agent's own mark bit for externalTrafficPolicy Cluster, and rejects anything else still
// addressed to a VIP. One Plane programs one family; two planes do the same job:
//
//   - the nftables plane (the default): the table "vip-allocator" of family ip or ip6, written
//     through netlink; every Service port and endpoint is an element of its sets and maps.
//   - the iptables plane: chains named "VIPA-…" in tables nat and filter, with jump rules into
//     them, written with one iptables-restore --noflush per Sync on the node's backend.
//
// Both also share the connection handoff chain VIPA-HANDOFF in iptables' mangle table.
// Open picks a plane (nftables when the kernel takes its ruleset, else iptables); a plane's
// first successful Sync removes what the other left; CleanupAll removes both.
//
// The files, as kube-proxy separates its proxiers:
//
//   - types.go, plane.go: what the agent calls (Service, Config, the Plane interface, Open,
//     CleanupAll); handoff.go: the connection handoff (Handoffs), written by the iptables code.
//   - targets.go: what both planes derive from a Service, backend-neutral (reachability,
//     the endpoints of each Service port, disjoint source ranges, ordering), so they serve
//     exactly the same endpoints.
//   - steering.go: steering a flow, on whichever node it enters by, to the node that serves it
//     (nftables plane only; internal/steering builds the tables).
//   - iptables*.go: the iptables plane (iptables_rules.go spells rules, iptables_render.go
//     plans a payload, iptables_exec.go runs the iptables tools).
//   - nftables*.go: the nftables plane (nftables_ruleset.go declares the table,
//     nftables_rule.go spells its rules in nft's words, nftables_elements.go and nftables_plan.go turn Services into element changes,
//     nftables_write.go sends the transactions).
//
// Planning and spelling are pure, so rules and elements are tested on values; the kernel
// tests run inside throwaway network namespaces. The package must never touch a table,
// chain or rule that is not its own, other than its jump rules into its iptables chains.
// The planes live in one package because they use each other: the nftables plane writes
// its handoffs through the iptables code, and each removes the other's leftovers.
package dataplane
