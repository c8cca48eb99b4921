// Package announce is the agent's announcer: it makes the VIPs this node may
// carry reachable from outside, by layer 2 (answering ARP and NDP for the L2
// VIPs it owns) and by BGP (advertising host routes for the VIPs of BGP-mode
// groups), and records on the ledger which nodes announce each VIP.
//
// Each pass is observe -> decide -> apply: observe.go reads what changed
// (package changes) from the cache into a store kept from pass to pass;
// decide is pure, its layer-2 side in decide_l2.go and its BGP side in
// decide_bgp.go; announcer.go and bgp.go perform the decision. Every agent
// runs the same decide over the same inputs, so they agree without talking.
//
// It announces only what the trust rule lets this node carry (package trust)
// and never writes forwarding rules: the data path (package proxy) does, and
// reports what was refused. Which agents are alive it learns from Liveness
// (package gossip); which node owns a VIP is package election's pure rule.
package announce
